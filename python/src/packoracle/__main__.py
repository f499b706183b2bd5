"""`python -m packoracle ARGS` runs the packoracle command installed with the package (the same binary as
`packoracle ARGS`), for environments whose scripts folder is not on PATH."""

import os
import shutil
import sys
import sysconfig


def main() -> None:
    scripts = sysconfig.get_path("scripts")
    command = os.path.join(scripts, "packoracle")
    if not os.path.exists(command):
        command = shutil.which("packoracle") or ""
    if not command:
        sys.exit(f"packoracle: the command is not installed next to this Python ({scripts}); reinstall the package "
                 f"with `pip install .` from the repository")
    os.execv(command, [command, *sys.argv[1:]])


if __name__ == "__main__":
    main()
