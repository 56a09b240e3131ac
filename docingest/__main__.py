from docingest.cli import main

raise SystemExit(main())
