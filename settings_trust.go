// settings_trust.go owns the trust of a workspace folder as Qwen Code
// decides it (security.folderTrust.enabled and the trust rules of
// trustedFolders.json) and how acpguard bounds it (DESIGN.md §10): the
// file may only narrow what required mode trusts, never widen it.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Where Qwen Code keeps its trust rules: trustedFolders.json in the Qwen
// home, or the file QWEN_CODE_TRUSTED_FOLDERS_PATH names.
const (
	trustedFoldersFileName = "trustedFolders.json"
	envTrustedFoldersPath  = "QWEN_CODE_TRUSTED_FOLDERS_PATH"
	keyFolderTrustEnabled  = "security.folderTrust.enabled"
)

// The trust levels of a rule, Qwen Code's names. TRUST_PARENT trusts the
// directory holding the rule's path.
const (
	trustFolder = "TRUST_FOLDER"
	trustParent = "TRUST_PARENT"
	doNotTrust  = "DO_NOT_TRUST"
)

// folderTrust is what the trust rules say of one workspace directory.
type folderTrust struct {
	// Enabled is security.folderTrust.enabled of the layers other than
	// the workspace's; false: every folder is trusted and no rule is read.
	Enabled bool
	// Trusted: the deepest rule that contains the directory trusts it.
	// No rule, or a DO_NOT_TRUST one, is untrusted, as in Qwen Code.
	Trusted bool
	File    string // the rules file
	Rule    string // the path of the rule that decided, "" none
}

// untrusted reports whether folder trust is on and the folder is not
// trusted: then its workspace settings file and .env are not read and the
// approval mode is at most default (plan stays), as in Qwen Code.
func (f folderTrust) untrusted() bool { return f.Enabled && !f.Trusted }

// why names, for a log line, why the folder is not trusted.
func (f folderTrust) why() string {
	if f.Rule == "" {
		return fmt.Sprintf("security.folderTrust is enabled and no rule of %q names the folder", f.File)
	}
	return fmt.Sprintf("the rule %q of %q does not trust it", f.Rule, f.File)
}

// folderTrustEnabled reads security.folderTrust.enabled from the layers
// given, a later one winning; a value that is not a boolean is an error
// naming the file.
func folderTrustEnabled(layers []settingsLayerObject) (bool, error) {
	enabled := false
	for _, ly := range layers {
		v, ok := settingsValueAt(ly.obj, keyFolderTrustEnabled)
		if !ok {
			continue
		}
		b, isBool := v.(bool)
		if !isBool {
			return false, fmt.Errorf("settings %q: key %q: want a boolean", ly.path, keyFolderTrustEnabled)
		}
		enabled = b
	}
	return enabled, nil
}

// settingsValueAt returns the value at a dotted key of a decoded settings
// object.
func settingsValueAt(obj map[string]any, key string) (any, bool) {
	var v any = obj
	for _, part := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[part]; !ok {
			return nil, false
		}
	}
	return v, true
}

// decideFolderTrust reads the rules file and decides dir, when enabled. A
// missing file has no rule. A file that cannot be read, is not a JSON
// object (comments allowed) or holds a level Qwen Code does not know is an
// error naming it: a misspelt DO_NOT_TRUST ignored would let a parent's
// trust through.
func decideFolderTrust(enabled bool, file, dir string) (folderTrust, error) {
	ft := folderTrust{Enabled: enabled, File: file}
	if !enabled {
		ft.Trusted = true
		return ft, nil
	}
	rules, err := readTrustedFolders(file)
	if err != nil {
		return folderTrust{}, err
	}
	at := pathVariants(dir)
	depth := -1
	for _, r := range rules {
		rulePath := r.path
		if r.level == trustParent {
			rulePath = filepath.Dir(rulePath)
		}
		d := -1
		for _, rv := range pathVariants(rulePath) {
			for _, v := range at {
				if withinDir(rv, v) {
					d = max(d, pathDepth(rv))
				}
			}
		}
		// The deepest rule wins; at the same depth, distrust.
		if d > depth || (d >= 0 && d == depth && r.level == doNotTrust && ft.Trusted) {
			depth, ft.Rule, ft.Trusted = d, r.path, r.level != doNotTrust
		}
	}
	return ft, nil
}

type trustRule struct{ path, level string }

// readTrustedFolders reads the rules of the file, sorted by path.
func readTrustedFolders(file string) ([]trustRule, error) {
	f, err := openSettingsFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trusted folders %q: %w", file, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("trusted folders %q: not a regular file", file)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSettingsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("trusted folders %q: %w", file, err)
	}
	if len(data) > maxSettingsBytes {
		return nil, fmt.Errorf("trusted folders %q: larger than %d bytes", file, maxSettingsBytes)
	}
	data = blankJSONC(data)
	obj, err := decodeObject(data)
	if err == nil {
		err = duplicateMember(data)
	}
	if err != nil {
		return nil, fmt.Errorf("trusted folders %q: %w; fix the file, or set %s false", file, err, keyFolderTrustEnabled)
	}
	var rules []trustRule
	for p, v := range obj {
		level, _ := v.(string)
		if !slices.Contains([]string{trustFolder, trustParent, doNotTrust}, level) {
			return nil, fmt.Errorf("trusted folders %q: key %q: want %s, %s or %s", file, p, trustFolder, trustParent, doNotTrust)
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("trusted folders %q: key %q: not an absolute path", file, p)
		}
		rules = append(rules, trustRule{p, level})
	}
	sort.Slice(rules, func(i, j int) bool { return rules[i].path < rules[j].path })
	return rules, nil
}

// pathVariants are the forms of p a rule is compared in, as Qwen Code
// compares them: cleaned, and with its symbolic links resolved.
func pathVariants(p string) []string {
	out := []string{filepath.Clean(p)}
	if r, err := filepath.EvalSymlinks(p); err == nil && r != out[0] {
		out = append(out, r)
	}
	return out
}

// pathDepth is the number of names in the absolute path p.
func pathDepth(p string) int {
	rel := strings.Trim(filepath.Clean(p), "/")
	if rel == "" {
		return 0
	}
	return strings.Count(rel, "/") + 1
}
