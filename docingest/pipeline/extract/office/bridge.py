"""Convert one file with a running LibreOffice, through UNO: `python3 bridge.py PIPE IN OUT FILTER`.

Run by Debian's `python3`, the interpreter `python3-uno` is built for (never by docingest's
own), as a short-lived child program of the parsing child: it imports the standard library
and `uno` only. It connects to the warm instance listening on the named pipe PIPE, loads IN
hidden and read-only with macros never executed (`MacroExecutionMode` NEVER_EXECUTE) and
links never updated (`UpdateDocMode` NO_UPDATE), stores it as OUT with the export filter
FILTER, and closes it. The exit status says what happened: 0 converted, 2 no instance
answered, 3 the file could not be loaded (damaged, or a password is asked for), 4 it could
not be stored.
"""

import sys
import time

import uno
from com.sun.star.beans import PropertyValue

CONNECT_SECONDS = 60.0
NEVER_EXECUTE = 0  # com.sun.star.document.MacroExecMode.NEVER_EXECUTE
NO_UPDATE = 0  # com.sun.star.document.UpdateDocMode.NO_UPDATE


def _props(**values):
    out = []
    for name, value in values.items():
        prop = PropertyValue()
        prop.Name, prop.Value = name, value
        out.append(prop)
    return tuple(out)


def _desktop(pipe):
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext(
        "com.sun.star.bridge.UnoUrlResolver", local
    )
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        try:
            context = resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")
            break
        except Exception:
            if time.monotonic() > deadline:
                sys.exit(2)
            time.sleep(0.05)
    return context.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", context)


def main():
    pipe, source, target, export_filter = sys.argv[1:5]
    desktop = _desktop(pipe)
    try:
        document = desktop.loadComponentFromURL(
            uno.systemPathToFileUrl(source),
            "_blank",
            0,
            _props(
                Hidden=True,
                ReadOnly=True,
                MacroExecutionMode=NEVER_EXECUTE,
                UpdateDocMode=NO_UPDATE,
                Password="",  # a protected file fails to load instead of asking
            ),
        )
    except Exception as exc:
        sys.stderr.write(f"load: {exc}\n")
        sys.exit(3)
    if document is None:
        sys.exit(3)
    try:
        document.storeToURL(
            uno.systemPathToFileUrl(target), _props(FilterName=export_filter, Overwrite=True)
        )
    except Exception as exc:
        sys.stderr.write(f"store: {exc}\n")
        sys.exit(4)
    finally:
        try:
            document.close(True)
        except Exception:
            pass
    sys.exit(0)


if __name__ == "__main__":
    main()
