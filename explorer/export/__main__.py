"""``python -m explorer.export``: the exporter's command line, which lives apart from the package the
page imports (explorer/cli/export.py)."""
import sys

from explorer.cli.export import main

if __name__ == "__main__":
    sys.exit(main())
