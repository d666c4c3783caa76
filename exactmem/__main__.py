import sys

from exactmem.commands.main import main

sys.exit(main())
