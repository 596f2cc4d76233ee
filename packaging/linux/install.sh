#!/usr/bin/env bash
# Install the built devmon app for this user on Linux: the folder, the commands, the menu entry
# and the icon.  No root needed.
#
#   packaging/linux/install.sh                 # build/dist/devmon -> ~/.local/opt/devmon
#   packaging/linux/install.sh APP_FOLDER      # another built folder (e.g. unpacked from a .tar.gz)
#   packaging/linux/install.sh --uninstall     # removes all of it again (mirrors, logs and
#                                              # settings in the user folders are kept)
#
# The menu entry starts the app by its full path, so it works whether or not ~/.local/bin is
# on the desktop session's PATH.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DATA="${XDG_DATA_HOME:-$HOME/.local/share}"
TARGET="$HOME/.local/opt/devmon"
BIN="$HOME/.local/bin"
ENTRY="$DATA/applications/devmon.desktop"
ICON="$DATA/icons/hicolor/256x256/apps/devmon.png"

refresh_menus() {
    command -v update-desktop-database >/dev/null && update-desktop-database -q "$DATA/applications" || true
    command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
}

if [ "${1:-}" = "--uninstall" ]; then
    rm -rf "$TARGET" "$ENTRY" "$ICON"
    for exe in devmon devmon-gui; do
        if [ -L "$BIN/$exe" ] && [ "$(readlink "$BIN/$exe")" = "$TARGET/$exe" ]; then
            rm "$BIN/$exe"
        fi
    done
    refresh_menus
    echo "devmon removed. Your mirrors, logs and settings are kept (see README: Where devmon keeps its files)."
    exit 0
fi

APP="$(cd "${1:-$ROOT/build/dist/devmon}" 2>/dev/null && pwd)" || {
    echo "No built app at ${1:-$ROOT/build/dist/devmon}: run packaging/build.sh first." >&2
    exit 1
}
if [ ! -x "$APP/devmon-gui" ] || [ ! -x "$APP/devmon" ]; then
    echo "$APP is not a built devmon app (no devmon and devmon-gui in it)." >&2
    exit 1
fi
"$APP/devmon" --version >/dev/null || { echo "$APP/devmon does not start." >&2; exit 1; }

mkdir -p "$(dirname "$TARGET")" "$BIN" "$(dirname "$ENTRY")" "$(dirname "$ICON")"
rm -rf "$TARGET.new"
cp -R "$APP" "$TARGET.new"          # -R keeps PyInstaller's symbolic links
rm -rf "$TARGET"
mv "$TARGET.new" "$TARGET"
ln -sfn "$TARGET/devmon" "$BIN/devmon"
ln -sfn "$TARGET/devmon-gui" "$BIN/devmon-gui"
cp "$TARGET/_internal/gui/resources/devmon.png" "$ICON"
sed -e "s|^Exec=devmon-gui|Exec=\"$TARGET/devmon-gui\"|" "$HERE/devmon.desktop" > "$ENTRY.new"
mv "$ENTRY.new" "$ENTRY"
refresh_menus

echo "Installed $("$TARGET/devmon" --version) in $TARGET"
echo "  menu entry: $ENTRY (devmon, in Science / Engineering)"
echo "  commands:   $BIN/devmon, $BIN/devmon-gui"
case ":$PATH:" in
    *":$BIN:"*) ;;
    *) echo "  $BIN is not on your PATH: add it to use the commands from a terminal." ;;
esac
echo "Start it from the menu, or: devmon-gui   (then Help → Run the demo)"
