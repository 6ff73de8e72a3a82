// acp_diff_test.go checks the diff content of edits and writes as an ACP
// client and a serve host see it: before the permission request, in it,
// and after completion, with Qwen Code's locations, _meta and file result.
package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// diffBlock is one ACP diff tool-call content block.
type diffBlock struct {
	Type    string  `json:"type"`
	Path    string  `json:"path"`
	OldText *string `json:"oldText"`
	NewText string  `json:"newText"`
}

// diffsOf returns the diff blocks of an update's content, checking that
// every block that says diff carries oldText, null or not.
func diffsOf(t *testing.T, content json.RawMessage) []diffBlock {
	t.Helper()
	var raw []map[string]json.RawMessage
	json.Unmarshal(content, &raw)
	var out []diffBlock
	for _, b := range raw {
		if string(b["type"]) != `"diff"` {
			continue
		}
		if old, ok := b["oldText"]; !ok || string(old) == "null" {
			t.Errorf("diff block without a string oldText (Qwen Code's hosts read one): %v", b)
		}
		var d diffBlock
		m, _ := json.Marshal(b)
		json.Unmarshal(m, &d)
		out = append(out, d)
	}
	return out
}

func TestACPDiffBeforePermissionAndAfterCompletion(t *testing.T) {
	var mu sync.Mutex
	var c *acpClient
	var sid string
	var seenAtAsk []toolUpdate // the updates the client had when it was asked
	var asked json.RawMessage
	c = startACP(t, func(method string, params json.RawMessage) (any, *rpcError) {
		if method != methodRequestPermission {
			return nil, &rpcError{Code: rpcMethodNotFound, Message: method}
		}
		mu.Lock()
		seenAtAsk, asked = c.sessionUpdates(sid), params
		mu.Unlock()
		return selected(optionProceedOnce), nil
	}, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "f.txt"), "one\ntwo\n")
	mu.Lock()
	sid = c.newSession(dir) // default mode: edits ask
	mu.Unlock()

	big := strings.Repeat("y", maxDiffTextBytes+1)
	mustWrite(t, filepath.Join(dir, "big.txt"), big)
	old := "one\ntwo\n"
	// The file result Qwen Code's hosts read in rawOutput: all of it for a
	// change that is shown, the names only for one too large.
	qwenFileKeys := []string{"fileDiff", "fileName", "filePath", "originalContent", "newContent", "diffStat"}
	for _, tt := range []struct {
		name, line string
		want       *diffBlock
	}{
		{"edit", `call edit {"file_path":"f.txt","old_string":"two","new_string":"TWO"}`,
			&diffBlock{"diff", filepath.Join(dir, "f.txt"), &old, "one\nTWO\n"}},
		{"write new file", `call write_file {"file_path":"new.txt","content":"fresh"}`,
			&diffBlock{"diff", filepath.Join(dir, "new.txt"), new(""), "fresh"}},
		{"oversized falls back to text", `call edit {"file_path":"big.txt","old_string":"y","new_string":"z","replace_all":true}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seenAtAsk = nil
			mu.Unlock()
			n := len(c.sessionUpdates(sid))
			c.prompt(sid, tt.line, "")
			mu.Lock()
			// The first prompt opens with the slash-command list.
			before := slices.DeleteFunc(slices.Clone(seenAtAsk[n:]), func(u toolUpdate) bool { return u.SessionUpdate == "available_commands_update" })
			mu.Unlock()
			ups := c.sessionUpdates(sid)[n:]
			tc := firstToolCall(t, ups)
			if len(before) != 1 || before[0].SessionUpdate != "tool_call" || before[0].Status != "pending" {
				t.Fatalf("updates before the permission request: %+v", before)
			}
			pending := diffsOf(t, before[0].Content)
			var done []diffBlock
			var doneText string
			var doneRaw map[string]any
			for _, u := range ups {
				if u.ToolCallID != tc.ToolCallID {
					continue
				}
				switch u.Status {
				case "completed":
					done, doneText, doneRaw = diffsOf(t, u.Content), u.Text, u.RawOutput
				case "pending", "in_progress":
					// Qwen Code's locations and _meta, the phase only on
					// the announcement.
					path, _ := tc.RawInput["file_path"].(string)
					if len(u.Locations) != 1 || u.Locations[0].Path != path || u.Locations[0].Line != nil {
						t.Errorf("%s locations = %+v, want [{%s null}]", u.Status, u.Locations, path)
					}
					phase := map[string]any{"pending": phasePreparing, "in_progress": nil}[u.Status]
					if u.Meta["provenance"] != provenanceBuiltin || u.Meta["phase"] != phase {
						t.Errorf("%s _meta = %v, want provenance %q and phase %v", u.Status, u.Meta, provenanceBuiltin, phase)
					}
				}
			}
			if doneText == "" {
				t.Errorf("completed update has no text content: %+v", ups)
			}
			var req struct {
				ToolCall struct {
					Content   json.RawMessage    `json:"content"`
					Locations []toolLocationJSON `json:"locations"`
				} `json:"toolCall"`
			}
			mu.Lock()
			json.Unmarshal(asked, &req)
			mu.Unlock()
			if path, _ := tc.RawInput["file_path"].(string); len(req.ToolCall.Locations) != 1 || req.ToolCall.Locations[0].Path != path {
				t.Errorf("permission request locations = %+v, want %s", req.ToolCall.Locations, path)
			}
			asking := diffsOf(t, req.ToolCall.Content)
			if tt.want == nil {
				if len(pending) != 0 || len(done) != 0 || len(asking) != 0 || string(req.ToolCall.Content) != "[]" {
					t.Errorf("oversized change sent diffs: pending %+v, asked %s, completed %+v", pending, req.ToolCall.Content, done)
				}
				if doneRaw["fileName"] != "big.txt" || doneRaw["fileDiff"] != nil || doneRaw["newContent"] != nil {
					t.Errorf("oversized change's rawOutput = %.200v, want its names only", doneRaw)
				}
				return
			}
			for _, k := range qwenFileKeys {
				if _, ok := doneRaw[k]; !ok {
					t.Errorf("completed rawOutput lacks %q: %.300v", k, doneRaw)
				}
			}
			if doneRaw["filePath"] != tt.want.Path || doneRaw["originalContent"] != *tt.want.OldText || doneRaw["newContent"] != tt.want.NewText {
				t.Errorf("completed rawOutput = %v, want %+v", doneRaw, *tt.want)
			}
			for what, got := range map[string][]diffBlock{"pending": pending, "asked": asking, "completed": done} {
				if len(got) != 1 || got[0].Path != tt.want.Path || got[0].NewText != tt.want.NewText ||
					(got[0].OldText == nil) != (tt.want.OldText == nil) || got[0].OldText != nil && *got[0].OldText != *tt.want.OldText {
					t.Errorf("%s diff = %+v, want %+v (old %q)", what, got, *tt.want, derefOr(tt.want.OldText))
				}
			}
		})
	}
	if asked == nil {
		t.Fatal("no permission request")
	}
}

// TestACPNoDiffForFailingPreview: an edit whose old_string is missing
// shows no diff and fails as before, without asking.
func TestACPNoDiffForFailingPreview(t *testing.T) {
	c := startACP(t, func(method string, params json.RawMessage) (any, *rpcError) {
		return selected(optionProceedOnce), nil
	}, nil)
	c.mustCall(methodInitialize, initializeParams(""), nil)
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "f.txt"), "one\n")
	sid := c.newSession(dir)
	c.prompt(sid, `call edit {"file_path":"f.txt","old_string":"zzz","new_string":"y"}`+"\n"+
		`call edit {"file_path":"gone.txt","old_string":"a","new_string":"b"}`, "")
	ups := c.sessionUpdates(sid)
	for _, u := range ups {
		if d := diffsOf(t, u.Content); len(d) != 0 {
			t.Errorf("%s %s carries a diff: %+v", u.SessionUpdate, u.Status, d)
		}
	}
	if got := agentText(ups); got != "edit: failed\nedit: failed\n" {
		t.Errorf("model answer = %q", got)
	}
}

// TestServeHostSeesDiff: serve forwards the child's updates unchanged, so
// the host sees the diff of an edit too.
func TestServeHostSeesDiff(t *testing.T) {
	ws := t.TempDir()
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, SettingsFile: yoloSettings(t)}, quickRaceExit)
	mustWrite(t, filepath.Join(ws, "f.txt"), "alpha\n")
	id := td.newSession(t, "")
	_, evs := td.runTurn(t, id, `call edit {"file_path":"f.txt","old_string":"alpha","new_string":"beta"}`)
	var seen []string
	for _, ev := range evs {
		if ev.typ != eventSessionUpdate {
			continue
		}
		var d struct {
			Update toolUpdate `json:"update"`
		}
		if err := json.Unmarshal(parseEnvelope(t, ev).Data, &d); err != nil {
			t.Fatal(err)
		}
		for _, b := range diffsOf(t, d.Update.Content) {
			if b.Path == filepath.Join(ws, "f.txt") && *b.OldText == "alpha\n" && b.NewText == "beta\n" {
				seen = append(seen, d.Update.SessionUpdate+":"+d.Update.Status)
			}
		}
	}
	if strings.Join(seen, ",") != "tool_call:pending,tool_call_update:completed" {
		t.Errorf("host saw the diff in %v, want the pending call and its completion; events %d", seen, len(evs))
	}
}
