; Inno Setup 6 script: a per-user installer of the devmon desktop app (no admin rights).
;
;   packaging\build.ps1                      (builds build\dist\devmon\ first)
;   iscc /DAppVersion=0.1.0 packaging\windows\devmon.iss
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
Name: "{group}\devmon"; Filename: "{app}\devmon-gui.exe"
Name: "{group}\Uninstall devmon"; Filename: "{uninstallexe}"
Name: "{autodesktop}\devmon"; Filename: "{app}\devmon-gui.exe"; Tasks: desktopicon

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
