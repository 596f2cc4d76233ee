# Build the devmon desktop app (PyInstaller, one folder) on Windows.
#
#   powershell -ExecutionPolicy Bypass -File packaging\build.ps1
#
# Result: build\dist\devmon\ with devmon.exe and devmon-gui.exe, and with Inno Setup 6
# installed, the installer build\installer\devmon-<version>-setup.exe.
$ErrorActionPreference = "Stop"
$Root = Split-Path -Parent $PSScriptRoot
Set-Location $Root
$Venv = if ($env:VENV) { $env:VENV } else { Join-Path $Root ".venv-build" }

if (-not (Test-Path (Join-Path $Venv "Scripts\python.exe"))) {
    Write-Host "Creating the build venv $Venv"
    py -3 -m venv $Venv
}
$Python = Join-Path $Venv "Scripts\python.exe"
& $Python -m pip install --upgrade pip | Out-Null
& $Python -m pip install . pyinstaller
if ($LASTEXITCODE -ne 0) { throw "pip install failed" }

$Watch = [Diagnostics.Stopwatch]::StartNew()
& $Python -m PyInstaller --noconfirm --clean packaging\devmon.spec --distpath build\dist --workpath build\work
if ($LASTEXITCODE -ne 0) { throw "PyInstaller failed" }

$App = Join-Path $Root "build\dist\devmon"
$VersionLine = & (Join-Path $App "devmon.exe") --version
if ($LASTEXITCODE -ne 0) { throw "the built devmon.exe does not start" }
Write-Host $VersionLine
$Version = ($VersionLine -split " ")[-1]
$Size = (Get-ChildItem $App -Recurse -File | Measure-Object -Property Length -Sum).Sum / 1MB
Write-Host ("Built in {0:N0} s: {1} ({2:N0} MB)" -f $Watch.Elapsed.TotalSeconds, $App, $Size)
Write-Host "  devmon.exe       the command line (devmon demo, devmon gui, ...)"
Write-Host "  devmon-gui.exe   the desktop app"

# The installer, when Inno Setup 6 is installed (on PATH or in its default folder).
$Iscc = (Get-Command iscc -ErrorAction SilentlyContinue).Source
if (-not $Iscc) {
    $Default = Join-Path ${env:ProgramFiles(x86)} "Inno Setup 6\ISCC.exe"
    if (Test-Path $Default) { $Iscc = $Default }
}
if ($Iscc) {
    & $Iscc "/DAppVersion=$Version" packaging\windows\devmon.iss
    if ($LASTEXITCODE -ne 0) { throw "Inno Setup failed" }
    Write-Host "Installer: build\installer\devmon-$Version-setup.exe"
} else {
    Write-Host "No installer: install Inno Setup 6 (https://jrsoftware.org/isinfo.php) and run again."
}
