// settings_dotenv.go owns the .env files as Qwen Code finds and reads them
// (which directories, which names, which variables a file may set) and
// what acpguard refuses of them (DESIGN.md §10): a workspace's .env comes
// with the repository, so in required mode it never sets the model
// endpoint, its key or a token, and is not read at all unless the operator
// trusts the workspace. envscrub.go applies what is returned.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
)

const (
	dotEnvFileName = ".env"
	// maxDotEnvBytes bounds one .env file: its variables reach every
	// child's environment, whose whole size execve bounds far lower.
	maxDotEnvBytes = 256 << 10
	// keyExcludedEnvVars is Qwen Code's list of variables a project's
	// plain .env may not set; default dotEnvDefaultExcluded.
	keyExcludedEnvVars = "advanced.excludedEnvVars"
)

var dotEnvDefaultExcluded = []string{"DEBUG", "DEBUG_MODE"}

// dotEnvLoaderNames are Qwen Code 0.24.4's loader-affecting variables, which
// no .env file may set (compared in lower case with "_" as "-"), and every
// BASH_FUNC_ name.
var dotEnvLoaderNames = []string{
	"NODE_OPTIONS", "npm_config_node_options", "npm_config_userconfig", "npm_config_globalconfig",
	"npm_config_script_shell", "npm_config_prefix", "NODE_PATH", "OPENSSL_CONF", "NODE_REPL_EXTERNAL_MODULE",
	"npm_config_node_gyp", "npm_config_init_module", "LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES",
	"BASH_ENV", "ZDOTDIR",
}

// dotEnvProjectExcluded are Qwen Code 0.24.4's variables only a user-level
// .env may set (compared in lower case), besides every GIT_CONFIG_KEY_<n>
// and GIT_CONFIG_VALUE_<n>: what selects settings files, turns off TLS
// checks, or names a program that tools run.
var dotEnvProjectExcluded = []string{
	"QWEN_HOME", "QWEN_RUNTIME_DIR", "QWEN_AGENT_EXECUTION_BACKEND", "QWEN_CODE_MCP_APPROVALS_PATH",
	envTrustedFoldersPath, envSystemSettingsPath, envSystemDefaultsPath, "QWEN_UPDATE_BASE_URL",
	"QWEN_CODE_WARNINGS_FILE", "QWEN_CODE_SERVE", "QWEN_CODE_DESKTOP", "QWEN_CODE_SETTINGS_CORRUPTED_PATH",
	"QWEN_CODE_SETTINGS_WAS_RECOVERED", "QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD", "QWEN_CODE_MEMORY_PROJECT_SCOPE",
	"QWEN_CODE_ENABLE_WORKFLOWS", "QWEN_CODE_DISABLE_WORKFLOWS", "QWEN_CODE_WORKFLOW_NAME_ONLY",
	"QWEN_REVIEW_PREBUILD", "QWEN_REVIEW_AUTOMATIC", "QWEN_TLS_INSECURE", "NODE_TLS_REJECT_UNAUTHORIZED",
	"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
	"GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "npm_config_cafile", "npm_config_ca", "npm_config_strict_ssl",
	"npm_config_strict-ssl", "PIP_CERT", "CURL_HOME", "WGETRC", "PIP_CONFIG_FILE", "GIT_SSH_COMMAND",
	"GIT_SSH", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_ASKPASS", "GIT_PROXY_COMMAND", "GIT_EDITOR",
	"GIT_SEQUENCE_EDITOR", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "XDG_CONFIG_HOME",
	"GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "QWEN_SANDBOX", "QWEN_SANDBOX_IMAGE",
	"QWEN_SANDBOX_PROXY_COMMAND", "QWEN_SANDBOX_NET", "SANDBOX", "SANDBOX_ENFORCEMENT", "XDG_CACHE_HOME",
	"TMPDIR", "TMP", "TEMP", "SSH_ASKPASS", "LESSOPEN", "LESSCLOSE", "NODE_GYP_FORCE_PYTHON",
	"npm_config_python", "PYTHON", "PYTHONSTARTUP", "VISUAL", "EDITOR", "npm_config_git", "BROWSER",
	"QWEN_CLI_ENTRY", "QWEN_CDP_MCP_COMMAND", "QWEN_SERVE_CDP_TUNNEL_OVER_WS", "QWEN_SERVE_NEW_FILE_MODE",
	"QWEN_SERVE_MAX_WORKSPACES", "QWEN_SERVE_SESSION_ATTACHMENTS_ROOT", "DEV",
}

var dotEnvGitConfigPair = regexp.MustCompile(`^git_config_(key|value)_\d+$`)

// dotEnvNeverFromWorkspace are what a workspace's .env never sets in
// required mode, trusted or not: where model calls go, with which key and
// model, the system prompt, and the tokens (DESIGN.md §10).
var dotEnvNeverFromWorkspace = []string{envModelBaseURL, envModelKey, envModelName, envSystemMD, envServerToken, envGuardToken}

// dotEnvNever are what no .env sets, the user's included: the tokens and
// private markers, which acpguard takes from its start environment or a
// token file only (DESIGN.md §4), and the variables that place the files
// read before the .env files are.
var dotEnvNever = []string{envGuardToken, envServerToken, "QWEN_DAEMON_TOKEN", envPrivateCapability, envPrivateGuard,
	"HOME", envQwenHome, envSystemSettingsPath, envSystemDefaultsPath, envTrustedFoldersPath}

// dotEnvOptions say where the .env files are looked for and how they are
// trusted.
type dotEnvOptions struct {
	// Dir is where the upward search starts (the workspace); "": the
	// user's files only (serve, whose environment all workspaces share).
	Dir            string
	Required       bool // required mode: a workspace's .env is untrusted
	TrustWorkspace bool // --trust-workspace-settings
	// Folder is what the trust rules say of Dir (settings_trust.go).
	Folder folderTrust
	// NoModelKey: serve's child, whose model is serve's, takes no key.
	NoModelKey bool
	// Excluded is advanced.excludedEnvVars.
	Excluded []string
}

// dotEnvVar is one variable to set, with the file it comes from.
type dotEnvVar struct{ Name, Value, File string }

// dotEnvLoad is what the .env files give: the files read, in order, the
// variables to set when unset (an earlier one wins) and what the operator
// is told.
type dotEnvLoad struct {
	Files    []string
	Vars     []dotEnvVar
	Warnings []string
}

// dotEnvCandidate is one file found, and whether it is the user's own.
type dotEnvCandidate struct {
	path string
	user bool
}

// findDotEnvFiles lists the .env files as Qwen Code finds them: from Dir
// (links resolved) upward, <dir>/.qwen/.env then <dir>/.env, the first that
// exists ending the search, which stops at the home directory; then the
// user's: <Qwen home>/.env, ~/.qwen/.env when QWEN_HOME moves the Qwen
// home, and ~/.env. A workspace file is left out, and the search goes on
// upward, when the folder is not trusted (settings_trust.go).
func findDotEnvFiles(src settingsSources, o dotEnvOptions) []dotEnvCandidate {
	var users []string
	if dir := src.qwenHome(); dir != "" {
		users = append(users, filepath.Join(dir, dotEnvFileName))
	}
	if src.Home != "" {
		users = append(users, filepath.Join(src.Home, qwenDirName, dotEnvFileName), filepath.Join(src.Home, dotEnvFileName))
	}
	var out []dotEnvCandidate
	if o.Dir != "" && !o.Folder.untrusted() {
		dir := o.Dir
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = r
		}
	walk:
		for ; !sameDir(dir, src.Home); dir = filepath.Dir(dir) {
			for _, p := range []string{filepath.Join(dir, qwenDirName, dotEnvFileName), filepath.Join(dir, dotEnvFileName)} {
				// O_NOFOLLOW guards only the file's own name: a workspace's
				// .qwen that is a symbolic link is not followed either.
				if filepath.Dir(p) != dir && !realDir(filepath.Dir(p)) {
					continue
				}
				if _, err := os.Lstat(p); err == nil && !slices.Contains(users, p) {
					out = append(out, dotEnvCandidate{p, false})
					break walk
				}
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	for _, p := range users {
		if _, err := os.Stat(p); err == nil && !slices.ContainsFunc(out, func(c dotEnvCandidate) bool { return c.path == p }) {
			out = append(out, dotEnvCandidate{p, true})
		}
	}
	return out
}

// loadDotEnv reads the .env files findDotEnvFiles lists and returns the
// variables they may set. A file that cannot be read is an error naming
// it; an untrusted workspace's is never opened, only named in a warning; a
// workspace's file is read without following a symbolic link, so that a
// link in a repository does not put a file from elsewhere into every
// child's environment.
func loadDotEnv(src settingsSources, o dotEnvOptions) (*dotEnvLoad, error) {
	excluded := o.Excluded
	if excluded == nil {
		excluded = dotEnvDefaultExcluded
	}
	l := &dotEnvLoad{}
	for _, c := range findDotEnvFiles(src, o) {
		if !c.user && o.Required && !o.TrustWorkspace {
			// Never opened: what the repository planted is not read, so it
			// can neither stop the start nor be told apart by what it holds.
			// findDotEnvFiles found it by its name alone (Lstat).
			l.Warnings = append(l.Warnings, fmt.Sprintf(".env %q: not read: the workspace is untrusted in required mode; give --%s to apply it", c.path, flagTrustWorkspaceSettings))
			continue
		}
		vars, err := readDotEnvFile(c.path, !c.user)
		if err != nil {
			return nil, err
		}
		l.Files = append(l.Files, c.path)
		qwenScoped := c.user || filepath.Base(filepath.Dir(c.path)) == qwenDirName
		var loaders []string
		for _, v := range vars {
			switch {
			case dotEnvLoader(v.Name):
				loaders = append(loaders, v.Name)
			case slices.Contains(dotEnvNever, v.Name):
				l.Warnings = append(l.Warnings, fmt.Sprintf(".env %q: ignore %s: acpguard takes it from its start environment only", c.path, v.Name))
			case !c.user && o.Required && slices.Contains(dotEnvNeverFromWorkspace, v.Name):
				l.Warnings = append(l.Warnings, refuseWorkspaceDotEnv(c.path, v.Name))
			case !c.user && dotEnvProjectOnlyUser(v.Name):
			case !qwenScoped && slices.Contains(excluded, v.Name):
			case v.Name == envModelKey && o.NoModelKey:
			default:
				l.Vars = append(l.Vars, v)
			}
		}
		if len(loaders) > 0 {
			l.Warnings = append(l.Warnings, fmt.Sprintf(".env %q: ignore %s: a .env file cannot set loader-affecting variables", c.path, strings.Join(loaders, ", ")))
		}
	}
	return l, nil
}

// logDotEnv logs, once at start, every .env file read, at info in
// required mode and at debug otherwise, then every warning.
func logDotEnv(log *slog.Logger, l *settingsLoad, required bool) {
	if l == nil || l.DotEnv == nil {
		return
	}
	level := slog.LevelDebug
	if required {
		level = slog.LevelInfo
	}
	for _, p := range l.DotEnv.Files {
		log.Log(context.Background(), level, fmt.Sprintf("settings: read %s (.env)", p))
	}
	for _, w := range l.DotEnv.Warnings {
		log.Warn(w)
	}
}

func refuseWorkspaceDotEnv(path, name string) string {
	return fmt.Sprintf(".env %q: refuse %s: a workspace's .env never sets the model endpoint, its key, the model, the system prompt or a token in required mode; set it in acpguard's environment or ~/.qwen/.env", path, name)
}

func dotEnvLoader(name string) bool {
	canon := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	return strings.HasPrefix(canon(name), "bash-func-") ||
		slices.ContainsFunc(dotEnvLoaderNames, func(n string) bool { return canon(n) == canon(name) })
}

func dotEnvProjectOnlyUser(name string) bool {
	lower := strings.ToLower(name)
	return dotEnvGitConfigPair.MatchString(lower) ||
		slices.ContainsFunc(dotEnvProjectExcluded, func(n string) bool { return strings.ToLower(n) == lower })
}

// dotEnvLine is one assignment of a .env file as the dotenv package Qwen
// Code uses reads it: an optional "export ", a name, "=" (or ": "), and a
// value single-, double- or back-quoted (over lines), or bare up to a "#".
var dotEnvLine = regexp.MustCompile(`(?m)^[ \t]*(?:export[ \t]+)?([\w.-]+)(?:[ \t]*=[ \t]*|:[ \t]+)('(?:\\'|[^'])*'|"(?:\\"|[^"])*"|` + "`(?:\\\\`|[^`])*`" + `|[^#\r\n]+)?[ \t]*(?:#.*)?$`)

// readDotEnvFile parses one .env file; a later assignment of a name wins,
// as in dotenv. A name that is not a portable variable name is skipped.
func readDotEnvFile(path string, noFollow bool) ([]dotEnvVar, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if noFollow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf(".env %q: a symbolic link in the workspace: not followed; put the file itself there", path)
		}
		return nil, fmt.Errorf(".env %q: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf(".env %q: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDotEnvBytes+1))
	if err != nil {
		return nil, fmt.Errorf(".env %q: %w", path, err)
	}
	if len(data) > maxDotEnvBytes {
		return nil, fmt.Errorf(".env %q: larger than %d bytes", path, maxDotEnvBytes)
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	var out []dotEnvVar
	for _, m := range dotEnvLine.FindAllStringSubmatch(text, -1) {
		name, value := m[1], strings.TrimSpace(m[2])
		if !envName.MatchString(name) {
			continue
		}
		if len(value) >= 2 && strings.ContainsRune(`'"`+"`", rune(value[0])) && value[len(value)-1] == value[0] {
			quote := value[0]
			value = value[1 : len(value)-1]
			if quote == '"' {
				value = strings.NewReplacer(`\n`, "\n", `\r`, "\r").Replace(value)
			}
		}
		out = slices.DeleteFunc(out, func(v dotEnvVar) bool { return v.Name == name })
		out = append(out, dotEnvVar{name, value, path})
	}
	return out, nil
}

// excludedEnvVarsOf reads advanced.excludedEnvVars from the merged
// settings: nil when unset, an error when it is not a list of names.
func excludedEnvVarsOf(merged map[string]any) ([]string, error) {
	v, ok := settingsValueAt(merged, keyExcludedEnvVars)
	if !ok {
		return nil, nil
	}
	list, isList := v.([]any)
	out := []string{}
	for _, e := range list {
		name, isString := e.(string)
		if !isString {
			isList = false
			break
		}
		out = append(out, name)
	}
	if !isList {
		return nil, fmt.Errorf("key %q: want an array of strings", keyExcludedEnvVars)
	}
	return out, nil
}

// realDir reports whether path is a directory itself, not a symbolic link
// to one.
func realDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}
