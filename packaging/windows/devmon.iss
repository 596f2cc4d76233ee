; Inno Setup 6 script: a per-user installer of the devmon desktop app (no admin rights).
;
;   packaging\build.ps1                      (builds build\dist\devmon\, then runs iscc when
;                                            Inno Setup is installed, with the app's version)
;   iscc /DAppVersion=0.1.0 packaging\windows\devmon.iss     (by hand)
;
; Result: build\installer\devmon-<version>-setup.exe.  Not tested in CI (needs Windows).

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif

[Setup]
AppId={{6F0B7C2E-4E1B-4C55-9D0E-3B2D8C1A7D42}
AppName=devmon
AppVersion={#AppVersion}
AppPublisher=devmon developers
AppVerName=devmon {#AppVersion}
VersionInfoVersion={#AppVersion}
LicenseFile=..\..\LICENSE
DefaultDirName={localappdata}\Programs\devmon
DefaultGroupName=devmon
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
OutputDir=..\..\build\installer
OutputBaseFilename=devmon-{#AppVersion}-setup
SetupIconFile=..\devmon.ico
UninstallDisplayIcon={app}\devmon-gui.exe
Compression=lzma2
SolidCompression=yes
WizardStyle=modern
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
ChangesEnvironment=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "addtopath"; Description: "Add the devmon command to PATH"; GroupDescription: "Command line:"

[Files]
Source: "..\..\build\dist\devmon\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
; AppUserModelID: the one gui/app.py sets, so the running app and its pinned shortcut are one
; task bar button
Name: "{group}\devmon"; Filename: "{app}\devmon-gui.exe"; AppUserModelID: "devmon.devmon"
Name: "{group}\Uninstall devmon"; Filename: "{uninstallexe}"
Name: "{autodesktop}\devmon"; Filename: "{app}\devmon-gui.exe"; AppUserModelID: "devmon.devmon"; Tasks: desktopicon

[Registry]
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; Tasks: addtopath; Check: NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\devmon-gui.exe"; Description: "{cm:LaunchProgram,devmon}"; Flags: nowait postinstall skipifsilent

[Code]
function NeedsAddPath(Dir: string): Boolean;
var
  Path: string;
begin
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Path) then
  begin
    Result := True;
    exit;
  end;
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Path) + ';') = 0;
end;

{ Uninstalling takes the app's folder out of the user's PATH again (and nothing else). }
procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  Path, Dir: string;
  P: Integer;
begin
  if CurUninstallStep <> usPostUninstall then
    exit;
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Path) then
    exit;
  Dir := ExpandConstant('{app}');
  P := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Path) + ';');
  if P = 0 then
    exit;
  { P is the position in ';' + Path + ';': the entry starts at P in Path, with its ';' before }
  if P > 1 then
    Delete(Path, P - 1, Length(Dir) + 1)
  else
    Delete(Path, 1, Length(Dir) + 1);
  RegWriteExpandStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Path);
end;
