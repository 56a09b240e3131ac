"""LibreOffice, kept warm and limited, for the legacy formats it converts."""
