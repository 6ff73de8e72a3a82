// bridge_wire_test.go tests the arguments' one way from a child to the
// provider: checked once by serve, forwarded as sent, digested once.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A child's arguments that are not one strict JSON object are denied as
// malformed, with no provider request; valid ones in another key order than
// the canonical one reach the provider byte for byte, and serve's digest is
// of exactly those bytes.
func TestServePrepareArgumentsChecked(t *testing.T) {
	prov := newTestProvider(t)
	var log bytes.Buffer
	d, ch, _ := fuzzDaemon(&log)
	d.provider = testProviderClient(t, prov.srv.URL, 5*time.Second)
	d.provider.token = prov.token
	params := func(args string) json.RawMessage {
		return json.RawMessage(`{"sessionId":"s1","promptId":"p1","toolCallId":"c1","toolName":"write_file","arguments":` + args + `}`)
	}
	deep := strings.Repeat(`{"a":`, maxWireArgumentsDepth) + `1` + strings.Repeat(`}`, maxWireArgumentsDepth)
	for name, raw := range map[string]json.RawMessage{
		"duplicate key":         params(`{"file_path":"a","file_path":"/etc/passwd"}`),
		"nested duplicate key":  params(`{"a":{"b":1,"b":2}}`),
		"escaped duplicate key": params(`{"a":1,"\u0061":2}`),
		"trailing data":         json.RawMessage(`{"sessionId":"s1","promptId":"p1","toolCallId":"c1","toolName":"write_file","arguments":{} {}}`),
		"array":                 params(`["a"]`),
		"string":                params(`"{}"`),
		"null":                  params(`null`),
		"missing":               json.RawMessage(`{"sessionId":"s1","promptId":"p1","toolCallId":"c1","toolName":"write_file"}`),
		"invalid UTF-8":         params("{\"content\":\"\xff\"}"),
		"invalid UTF-8 key":     params("{\"\xc3\":1}"),
		"over the bound":        params(`{"content":"` + strings.Repeat("x", maxWireArguments) + `"}`),
		"too deep":              params(`{"x":` + deep + `}`),
		"not JSON":              params(`{"a":01}`),
		"unknown member":        json.RawMessage(`{"sessionId":"s1","promptId":"p1","toolCallId":"c1","toolName":"write_file","arguments":{},"Arguments":{}}`),
	} {
		log.Reset()
		if dec := d.prepare(context.Background(), ch, raw); dec.Allowed || dec.Reason != guardFailedReason {
			t.Errorf("%s: decision %+v, want the guard failure", name, dec)
		}
		if recs := decisions(t, log.String()); len(recs) != 1 || recs[0].Outcome != outcomeMalformed {
			t.Errorf("%s: decision log %q, want one %s", name, log.String(), outcomeMalformed)
		}
	}
	if _, calls := prov.counts(); calls != 0 {
		t.Fatalf("malformed arguments made %d provider requests", calls)
	}

	sent := `{"z":[1,2.50,{"y":true,"x":null}],"a":"<\u00e9>"}`
	log.Reset()
	if dec := d.prepare(context.Background(), ch, params(" \n"+sent+"\t")); !dec.Allowed {
		t.Fatalf("valid arguments: decision %+v (log %s)", dec, log.String())
	}
	if _, calls := prov.counts(); calls != 1 || string(prov.calls[0]["arguments"]) != sent {
		t.Fatalf("provider saw %d requests, arguments %s; want one, %s as sent", calls, prov.calls[0]["arguments"], sent)
	}
	if recs := decisions(t, log.String()); len(recs) != 1 || recs[0].ArgumentsSha256 != argumentsDigest([]byte(sent)) {
		t.Errorf("decision log %s: want the digest of the bytes forwarded", log.String())
	}
}

// serve's decision log and the reference provider's audit log carry the
// same argumentsSha256 for one call, and it is the digest of the arguments
// the provider received: acp's child sends them in canonical form.
func TestServeDigestJoinsProviderAudit(t *testing.T) {
	tmp := t.TempDir()
	policy := filepath.Join(tmp, "policy.json")
	mustWrite(t, policy, `{"rules":[{"tool":"*","decision":"allow"}]}`)
	audit := filepath.Join(tmp, "audit.jsonl")
	p := startRefProvider(t, providerOptions{PolicyFile: policy, AuditPath: audit, AuditArguments: true})
	ws := t.TempDir()
	settings := filepath.Join(tmp, "settings.json")
	mustWrite(t, settings, `{"tools":{"approvalMode":"yolo"}}`)
	logPath := filepath.Join(tmp, "decisions.jsonl")
	endpoint, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	guard := guardConfig{Mode: guardModeRequired, Endpoint: endpoint, Timeout: testTimeout(5 * time.Second), Token: providerTestToken}
	td := startTestDaemon(t, serveOptions{Workspaces: []string{ws}, SettingsFile: settings, Guard: guard, DecisionLog: logPath})
	id := td.newSession(t, "")
	stream := td.openEvents(t, id, "")
	// Keys out of order, characters json.Marshal escapes, a number as written.
	pid := td.prompt(t, id, `call write_file {"file_path":"out.txt","content":"<b> & \u2028 é 2.50"}`+"\n"+
		`call run_shell_command {"description":"d","command":"echo 1.0e3 \"q\""}`)
	readSSE(t, stream, untilTurnEnd(pid))
	recs := decisions(t, mustRead(t, logPath))
	got := readProviderAudit(t, audit)
	if len(recs) != 2 || len(got) != 2 {
		t.Fatalf("%d decision records, %d audit records; want 2 each", len(recs), len(got))
	}
	for i, rec := range recs {
		a := got[i]
		if rec.RequestID != a.RequestID || rec.ArgumentsSha256 != a.ArgumentsSHA256 || rec.ArgumentsSha256 != argumentsDigest(a.Arguments) {
			t.Errorf("call %d: decision record %+v and audit record %+v do not join on the digest of %s", i, rec, a, a.Arguments)
		}
	}
}
