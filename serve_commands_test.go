// serve_commands_test.go tests the ACP agent's available_commands_update as
// a host sees it through serve (DESIGN.md §7): in a session's first turn,
// right after serve's echo, listing the slash commands open in the managed
// child, and in no later turn.
package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestServeFirstTurnCarriesAvailableCommands(t *testing.T) {
	prov := newTestProvider(t)
	td := startTestDaemon(t, serveOptions{Guard: prov.guard(t), AllowSlashCommands: []string{"help", "tools"}, DisabledSlashCommands: []string{"tools"}})
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	type commandsUpdate struct {
		SessionUpdate     string             `json:"sessionUpdate"`
		AvailableCommands []availableCommand `json:"availableCommands"`
	}
	for turn := range 2 {
		pid := td.prompt(t, id, "hello")
		var frames []string
		var got []commandsUpdate
		for _, ev := range readSSE(t, stream, untilTurnEnd(pid)) {
			e := parseEnvelope(t, ev)
			if e.PromptID != pid {
				continue
			}
			var d struct {
				SessionID string          `json:"sessionId"`
				Update    json.RawMessage `json:"update"`
			}
			kind := ev.typ
			if ev.typ == eventSessionUpdate && json.Unmarshal(e.Data, &d) == nil {
				var u struct{ SessionUpdate string }
				json.Unmarshal(d.Update, &u)
				kind = u.SessionUpdate
				if kind == "available_commands_update" {
					var c commandsUpdate
					if err := decodeStrict(d.Update, &c); err != nil || d.SessionID != id || !strings.Contains(string(d.Update), `"input":null`) {
						t.Errorf("turn %d: available_commands_update %s: %v", turn, e.Data, err)
					}
					got = append(got, c)
				}
			}
			frames = append(frames, kind)
		}
		if turn > 0 {
			if len(got) != 0 {
				t.Errorf("turn %d frames = %v, want available_commands_update in the first turn only", turn, frames)
			}
			continue
		}
		if len(frames) < 2 || frames[0] != "user_message_chunk" || frames[1] != "available_commands_update" || len(got) != 1 {
			t.Fatalf("first turn frames = %v, want the echo, then one available_commands_update", frames)
		}
		want := []availableCommand{{Name: slashHelp, Description: "this text"}}
		if !slices.Equal(got[0].AvailableCommands, want) {
			t.Errorf("availableCommands = %+v, want %+v: the opened commands but the disabled /tools", got[0].AvailableCommands, want)
		}
	}
}

// TestServeUsageChunkAfterModelCall: when the model service reports usage,
// the turn carries it as Qwen Code does, an agent_message_chunk with text ""
// and _meta {usage, durationMs} after the call's text; a call that reports
// none adds no such chunk.
func TestServeUsageChunkAfterModelCall(t *testing.T) {
	fm := newFakeModelServer(t, func(n int) []string {
		if n == 0 {
			return []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`,
				`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
				"[DONE]",
			}
		}
		return []string{`{"choices":[{"index":0,"delta":{"content":"again"},"finish_reason":"stop"}]}`, "[DONE]"}
	})
	td := startTestDaemon(t, serveOptions{Model: openAIConfig{BaseURL: fm.srv.URL, Model: "m"}})
	id := td.newSession(t, "")
	type chunk struct {
		SessionUpdate string      `json:"sessionUpdate"`
		Content       textContent `json:"content"`
		Meta          *struct {
			Usage      modelUsage `json:"usage"`
			DurationMs *int64     `json:"durationMs"`
		} `json:"_meta"`
	}
	for turn, wantUsage := range []bool{true, false} {
		_, evs := td.runTurn(t, id, "hello")
		var texts []string
		var usage []chunk
		for _, ev := range evs {
			var d struct {
				Update json.RawMessage `json:"update"`
			}
			var c chunk
			if ev.typ != eventSessionUpdate || json.Unmarshal(parseEnvelope(t, ev).Data, &d) != nil || json.Unmarshal(d.Update, &c) != nil || c.SessionUpdate != "agent_message_chunk" {
				continue
			}
			texts = append(texts, c.Content.Text)
			if c.Meta != nil {
				usage = append(usage, c)
			}
		}
		if last := evs[len(evs)-1]; last.typ != eventTurnComplete {
			t.Fatalf("turn %d ended with %s %s", turn, last.typ, last.data)
		}
		if !wantUsage {
			if len(usage) != 0 {
				t.Errorf("turn %d: usage chunks %+v from a call that reported none", turn, usage)
			}
			continue
		}
		want := modelUsage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
		if len(usage) != 1 || usage[0].Content != (textContent{"text", ""}) || usage[0].Meta.Usage != want || usage[0].Meta.DurationMs == nil || *usage[0].Meta.DurationMs < 0 {
			t.Fatalf("turn %d: usage chunks %+v, want one with text \"\" and usage %+v and durationMs", turn, usage, want)
		}
		if !slices.Equal(texts, []string{"done", ""}) {
			t.Errorf("turn %d: agent_message_chunk texts %q, want the call's text, then the usage chunk", turn, texts)
		}
	}
	if calls := fm.seen(); len(calls) == 0 || string(calls[0].body["stream_options"]) != `{"include_usage":true}` {
		t.Errorf("model calls %+v, want stream_options include_usage, so a streaming service reports usage", calls)
	}
}
