"""Generated control-plane API (package ``sluice``); see proto/README.md."""
