from envbuild.cli.app import main

raise SystemExit(main())
