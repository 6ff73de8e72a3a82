// acp.go owns the ACP agent ("acpguard acp"): sessions, the prompt loop,
// session/update emission, and the managed-child handshake with serve.
package main

import "context"

// STUB
func runACP(ctx context.Context, sys *system, args []string) error {
	_, err := parseACPArgs(args, sys)
	return err
}
