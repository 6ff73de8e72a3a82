// settings_mcpjson.go owns the project's MCP servers as Qwen Code 0.24.4
// reads them: <workspace>/.mcp.json in Claude's form, a layer between the
// user file and the workspace file, untrusted in required mode like the
// workspace file; and the approvals of ~/.qwen/mcpApprovals.json, without
// which a server of the workspace file or of .mcp.json does not run.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Qwen Code's names for the project file and the approvals.
const (
	scopeProject          = "project"
	projectMCPFileName    = ".mcp.json"
	mcpApprovalsFileName  = "mcpApprovals.json"
	envMCPApprovalsPath   = "QWEN_CODE_MCP_APPROVALS_PATH"
	mcpApprovalApproved   = "approved"
	maxMCPApprovalsBytes  = maxSettingsBytes
	mcpClaudeTypeHTTP     = "http"
	mcpClaudeTypeSDK      = "sdk"
	mcpServersSettingsKey = "mcpServers"
)

// mcpHashIgnored are the keys Qwen Code leaves out of a server's approval
// hash: where it came from and its label.
var mcpHashIgnored = []string{"scope", "extensionName", "description"}

// readProjectMCPLayer reads .mcp.json as a settings layer holding only its
// mcpServers, each entry in Qwen Code's form (normalizeClaudeMCPServer). A
// missing file is no layer; a file that is not {"mcpServers": {...}} is an
// error naming it.
func readProjectMCPLayer(path string) (map[string]any, error) {
	f, err := openSettingsFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %q: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSettingsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", path, err)
	}
	if len(data) > maxSettingsBytes {
		return nil, fmt.Errorf("read %q: larger than %d bytes", path, maxSettingsBytes)
	}
	obj, err := decodeObject(blankJSONC(data))
	if err == nil {
		err = duplicateMember(blankJSONC(data))
	}
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", path, err)
	}
	servers, ok := obj[mcpServersSettingsKey].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("read %q: it has no %q object", path, mcpServersSettingsKey)
	}
	out := map[string]any{}
	for name, v := range servers {
		entry, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("read %q: server %q is not an object", path, name)
		}
		out[name] = normalizeClaudeMCPServer(entry)
	}
	return map[string]any{mcpServersSettingsKey: out}, nil
}

// normalizeClaudeMCPServer turns a Claude entry into Qwen Code's, as Qwen
// Code does: with command, httpUrl or tcp the type goes; a url with type
// "http" becomes httpUrl, any other url stays url (SSE).
func normalizeClaudeMCPServer(e map[string]any) map[string]any {
	out := maps.Clone(e)
	typ, hasType := e["type"]
	if e["command"] != nil || e["httpUrl"] != nil || e["tcp"] != nil {
		if hasType && typ != mcpClaudeTypeSDK {
			delete(out, "type")
		}
		return out
	}
	if u, ok := e["url"].(string); ok {
		delete(out, "url")
		if typ != mcpClaudeTypeSDK {
			delete(out, "type")
		}
		if typ == mcpClaudeTypeHTTP {
			out["httpUrl"] = u
		} else {
			out["url"] = u
		}
	}
	return out
}

// mcpApprovalsPath is where Qwen Code keeps its approvals.
func mcpApprovalsPath(src settingsSources) string {
	if p, ok := src.Lookup(envMCPApprovalsPath); ok && p != "" {
		return p
	}
	if dir := src.qwenHome(); dir != "" {
		return filepath.Join(dir, mcpApprovalsFileName)
	}
	return ""
}

// mcpApproval is one stored decision: the config hash it was given for.
type mcpApproval struct {
	Hash   string `json:"hash"`
	Status string `json:"status"`
}

// readMCPApprovals reads the approvals of one project root. A missing or
// unreadable file approves nothing (fail closed); what is wrong with it is
// returned as a warning.
func readMCPApprovals(path, root string) (map[string]mcpApproval, string) {
	if path == "" {
		return nil, ""
	}
	b, err := readMCPApprovalsFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ""
	}
	var all map[string]map[string]mcpApproval
	if err == nil {
		all, err = decodeMCPApprovals(blankJSONC(b))
	}
	if err != nil {
		return nil, fmt.Sprintf("MCP approvals %q: %v; no project server is approved", path, err)
	}
	return all[filepath.Clean(root)], ""
}

// mcpApprovalsShape is the approvals file as Qwen Code writes it, named in
// the error that refuses another.
const mcpApprovalsShape = `{"<project root>": {"<server>": {"hash": "<sha-256>", "status": "approved"}}}, each member once`

// decodeMCPApprovals reads the whole approvals file strictly (decodeStrict):
// a member given twice anywhere, a member an approval does not have, a
// value of another type refuse the file, every project's records included:
// a file acpguard cannot read as Qwen Code wrote it approves nothing.
func decodeMCPApprovals(b []byte) (map[string]map[string]mcpApproval, error) {
	var raw map[string]map[string]json.RawMessage
	if err := decodeStrict(b, &raw); err != nil {
		return nil, fmt.Errorf("%v (want %s)", err, mcpApprovalsShape)
	}
	out := make(map[string]map[string]mcpApproval, len(raw))
	for _, root := range slices.Sorted(maps.Keys(raw)) {
		if raw[root] == nil {
			return nil, fmt.Errorf("project %q: null, not an object (want %s)", root, mcpApprovalsShape)
		}
		out[root] = map[string]mcpApproval{}
		for _, name := range slices.Sorted(maps.Keys(raw[root])) {
			var a mcpApproval
			err := decodeStrict(raw[root][name], &a)
			if err == nil && string(raw[root][name]) == "null" {
				err = errors.New("null, not an object")
			}
			if err != nil {
				return nil, fmt.Errorf("project %q, server %q: %v (want %s)", root, name, err, mcpApprovalsShape)
			}
			out[root][name] = a
		}
	}
	return out, nil
}

// hashMCPServerConfig is Qwen Code's approval hash of a server entry: the
// SHA-256 of its JSON with every object's keys sorted, without the keys
// of mcpHashIgnored. Strings are written as JavaScript's JSON.stringify
// writes them (no HTML escaping).
func hashMCPServerConfig(entry map[string]any) string {
	e := maps.Clone(entry)
	for _, k := range mcpHashIgnored {
		delete(e, k)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(e) // a decoded JSON value: cannot fail; map keys are sorted
	// JSON.stringify leaves U+2028 and U+2029 as they are.
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	b = bytes.ReplaceAll(b, []byte(`\u2028`), []byte("\u2028"))
	b = bytes.ReplaceAll(b, []byte(`\u2029`), []byte("\u2029"))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// gateProjectMCPServers drops every server of the workspace file or of
// .mcp.json that mcpApprovals.json has not approved for this config, as
// Qwen Code does outside yolo; raw holds each server's entry as its file
// gave it, for the hash.
func gateProjectMCPServers(st *settings, l *settingsLoad, src settingsSources, root string, raw map[string]map[string]any) {
	if st.Tools.ApprovalMode == modeYolo || len(st.MCPServers) == 0 {
		return
	}
	path := mcpApprovalsPath(src)
	approvals, warning := readMCPApprovals(path, root)
	if warning != "" {
		l.Warnings = append(l.Warnings, warning)
	}
	for _, name := range slices.Sorted(maps.Keys(st.MCPServers)) {
		file := l.origin[mcpServersSettingsKey+"."+name]
		scope := ""
		for _, f := range l.Files {
			if f.Path == file {
				scope = f.Scope
			}
		}
		if scope != scopeWorkspace && scope != scopeProject {
			continue
		}
		if a, ok := approvals[name]; ok && a.Status == mcpApprovalApproved && raw[name] != nil && a.Hash == hashMCPServerConfig(raw[name]) {
			continue
		}
		delete(st.MCPServers, name)
		l.Warnings = append(l.Warnings, fmt.Sprintf("settings %q: MCP server %q waits for approval: %q approves no such config of it for %q (approve it in Qwen Code, or run in yolo mode); it does not run", file, name, path, root))
	}
}

// readMCPApprovalsFile reads the approvals file: a regular file of at most
// maxMCPApprovalsBytes.
func readMCPApprovalsFile(path string) ([]byte, error) {
	f, err := openSettingsFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMCPApprovalsBytes+1))
	if err == nil && len(b) > maxMCPApprovalsBytes {
		err = fmt.Errorf("larger than %d bytes", maxMCPApprovalsBytes)
	}
	return b, err
}
