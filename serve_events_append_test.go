// serve_events_append_test.go tests the session update envelope built by
// appending against the encoder that builds every other envelope.
package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The envelope of an update is byte for byte the encoder's for a compact
// update (every update a child sends is), and still one line for one with
// line breaks.
func TestUpdateEnvelopeIsTheEncoders(t *testing.T) {
	for _, tt := range []struct {
		typ, prompt, origin, session string
		update                       string
	}{
		{eventSessionUpdate, "p1", "", "s1", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a <b> & \u2028"}}`},
		{eventSessionUpdate, "", "client-<1>", "s\"2\u2028\xff", `{"x":[1,2.50,true,null]}`},
		{eventSessionUpdate, "p\n", "c", "s", "[1,\n2,\r\n 3]"},
	} {
		l := newStreamLog()
		l.publishFrom(tt.typ, tt.prompt, tt.origin, sessionUpdateEvent{SessionID: tt.session, Update: json.RawMessage(tt.update)})
		evs := replayOf(l, 0)
		if len(evs) != 1 {
			t.Fatalf("%d events for %q", len(evs), tt.update)
		}
		got := evs[0].data
		var env struct {
			Meta envelopeMeta `json:"_meta"`
		}
		if err := json.Unmarshal(got, &env); err != nil {
			t.Fatalf("envelope %s: %v", got, err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(streamEnvelope{ID: 1, V: 1, Type: tt.typ, PromptID: tt.prompt, Data: sessionUpdateEvent{SessionID: tt.session, Update: json.RawMessage(tt.update)}, OriginatorClientID: tt.origin, Meta: env.Meta})
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if !bytes.Equal(got, want) {
			t.Errorf("envelope\n%s\nwant the encoder's\n%s", got, want)
		}
	}
}

// publishUpdate, the typed way of the hottest event, publishes what publish
// does with the same update, an empty one included.
func TestPublishUpdateIsPublish(t *testing.T) {
	for _, update := range []string{`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a <b>"}}`, "[1,\n2]", ""} {
		u := sessionUpdateEvent{SessionID: "s1", Update: json.RawMessage(update)}
		if update == "" {
			u.Update = nil
		}
		typed, generic := newStreamLog(), newStreamLog()
		typed.publishUpdate("p1", u)
		generic.publish(eventSessionUpdate, "p1", u)
		got, want := replayOf(typed, 0), replayOf(generic, 0)
		if len(got) != 1 || len(want) != 1 {
			t.Fatalf("update %q: %d and %d events, want 1", update, len(got), len(want))
		}
		var a, b map[string]any
		if err := json.Unmarshal(got[0].data, &a); err != nil {
			t.Fatalf("update %q: envelope %s: %v", update, got[0].data, err)
		}
		if err := json.Unmarshal(want[0].data, &b); err != nil {
			t.Fatalf("update %q: envelope %s: %v", update, want[0].data, err)
		}
		delete(a, "_meta")
		delete(b, "_meta")
		if ga, gb := mustJSON(t, a), mustJSON(t, b); ga != gb || got[0].typ != eventSessionUpdate {
			t.Errorf("update %q: publishUpdate published %s (%s), publish %s", update, got[0].data, got[0].typ, want[0].data)
		}
	}
}
