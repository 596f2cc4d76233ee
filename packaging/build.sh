#!/usr/bin/env bash
# Build the devmon desktop app (PyInstaller, one folder) on Linux or macOS.
#
#   packaging/build.sh              # uses/creates .venv-build/ next to the repository root
#   VENV=/path/to/venv packaging/build.sh
#   PYTHON=python3.12 packaging/build.sh
#
# Result: build/dist/devmon/ with the executables devmon and devmon-gui.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/.venv-build}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "Creating the build venv $VENV"
    "$PYTHON" -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
python -m pip install --upgrade pip >/dev/null
python -m pip install . pyinstaller

started=$(date +%s)
pyinstaller --noconfirm --clean packaging/devmon.spec --distpath build/dist --workpath build/work
seconds=$(( $(date +%s) - started ))

APP="$ROOT/build/dist/devmon"
"$APP/devmon" --version
echo
echo "Built in ${seconds} s: $APP ($(du -sh "$APP" | cut -f1))"
echo "  $APP/devmon       the command line (devmon demo, devmon gui, ...)"
echo "  $APP/devmon-gui   the desktop app"
echo "Copy the whole folder; see packaging/README.md to add a menu entry."
