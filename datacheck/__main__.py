from datacheck.cli.main import entry

entry()
