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

# Qt's xcb plugin (X11 desktops) must find every library inside the app: what the build
# machine lacks is not bundled, and the app then fails to start on desktops that lack it too.
XCB="$APP/_internal/PySide6/Qt/plugins/platforms/libqxcb.so"
if [ -f "$XCB" ] && command -v ldd >/dev/null; then
    missing=$(LD_LIBRARY_PATH="$APP/_internal" ldd "$XCB" | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
    if [ -n "$missing" ]; then
        echo "WARNING: this machine lacks libraries of Qt's xcb plugin, so the app does not" \
             "bundle them and will not start on X11 desktops without them: $missing" >&2
        echo "  Debian/Ubuntu: bash .ci/install-system-packages, then build again." >&2
    fi
fi
echo
echo "Built in ${seconds} s: $APP ($(du -sh "$APP" | cut -f1))"
echo "  $APP/devmon       the command line (devmon demo, devmon gui, ...)"
echo "  $APP/devmon-gui   the desktop app"
if [ -d "$ROOT/build/dist/devmon.app" ]; then
    echo "  $ROOT/build/dist/devmon.app   the macOS app bundle (drag it into Applications)"
fi
echo "Copy the whole folder; see packaging/README.md to add a menu entry."
