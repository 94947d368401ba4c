from textdet.cli import main

raise SystemExit(main())
