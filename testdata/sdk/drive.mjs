// Drives "acpguard acp" with the official ACP TypeScript SDK, as an editor
// would: initialize, session/new, a prompt whose write asks for permission,
// set_mode, a shell call. The write's diff (oldText null: a new file) reaches
// the SDK in the pending tool_call, before the permission request, and in
// the completed update. Exits non-zero on the first unexpected answer.
// Usage: node drive.mjs <acpguard binary> <workspace dir>
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Writable, Readable } from "node:stream";
import fs from "node:fs";
import path from "node:path";

const [bin, dir] = process.argv.slice(2);
const proc = spawn(bin, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
const updates = [];
const commands = [];
let updatesAtCommands = -1;
let permissions = 0;
let updatesAtAsk = -1;
function check(ok, what) {
  if (!ok) {
    console.error("FAIL: " + what);
    process.exit(1);
  }
}
const app = acp.client({ name: "acpguard-sdk-test" })
  .onRequest(acp.methods.client.session.requestPermission, async (ctx) => {
    permissions++;
    updatesAtAsk = updates.length;
    // Qwen Code's options: the editor picks the allow_once kind.
    const once = ctx.params.options.find((o) => o.kind === "allow_once");
    check(once && once.optionId === "proceed_once", "permission options: " + JSON.stringify(ctx.params.options));
    return { outcome: { outcome: "selected", optionId: once.optionId } };
  })
  .onNotification(acp.methods.client.session.update, async (ctx) => {
    // The slash-command list comes once, at the start of the first prompt.
    if (ctx.params.update.sessionUpdate === "available_commands_update") {
      commands.push(ctx.params.update);
      if (updates.length === 0) updatesAtCommands = 0;
      return;
    }
    updates.push(ctx.params.update);
  });
await app.connectWith(acp.ndJsonStream(Writable.toWeb(proc.stdin), Readable.toWeb(proc.stdout)), async (agent) => {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
    clientInfo: { name: "acpguard-sdk-test", version: "1.0.0" },
  });
  check(init.protocolVersion === 1 && init.agentInfo.name === "acpguard", "initialize: " + JSON.stringify(init));
  const s = await agent.request(acp.methods.agent.session.new, { cwd: dir, mcpServers: [] });
  check(s.modes.currentModeId === "default", "session/new: " + JSON.stringify(s));
  const r1 = await agent.request(acp.methods.agent.session.prompt, {
    sessionId: s.sessionId,
    prompt: [{ type: "text", text: 'call write_file {"file_path":"a.txt","content":"sdk"}' }],
  });
  check(r1.stopReason === "end_turn" && permissions === 1, "write prompt: " + JSON.stringify(r1) + " permissions " + permissions);
  await agent.request(acp.methods.agent.session.setMode, { sessionId: s.sessionId, modeId: "yolo" });
  const r2 = await agent.request(acp.methods.agent.session.prompt, {
    sessionId: s.sessionId,
    prompt: [{ type: "text", text: 'call run_shell_command {"command":"echo hi"}' }],
  });
  check(r2.stopReason === "end_turn" && permissions === 1, "shell prompt: " + JSON.stringify(r2));
});
proc.stdin.end();
// A running shell command's live output (in_progress updates that carry
// _meta.shellOutput) may come or not, as fast as echo ends: the sequence is
// checked without them, and each that came holds the command's output.
const live = updates.filter((u) => u._meta && u._meta.shellOutput);
for (const u of live) {
  check(u.sessionUpdate === "tool_call_update" && u.status === "in_progress" && u._meta.shellOutput.chunk === "hi\n", "live output " + JSON.stringify(u));
}
const kinds = updates.filter((u) => !(u._meta && u._meta.shellOutput)).map((u) => u.sessionUpdate + (u.status ? ":" + u.status : "")).join(",");
check(kinds === "tool_call:pending,tool_call_update:in_progress,tool_call_update:completed,agent_message_chunk," +
  "current_mode_update,tool_call:pending,tool_call_update:in_progress,tool_call_update:completed,agent_message_chunk", "updates " + kinds);
check(updates[0].rawInput.file_path === path.join(dir, "a.txt") && updates[0]._meta.toolName === "write_file", "tool_call " + JSON.stringify(updates[0]));
check(fs.readFileSync(path.join(dir, "a.txt"), "utf8") === "sdk", "a.txt content");
const isWriteDiff = (c) => c.type === "diff" && c.path === path.join(dir, "a.txt") && c.oldText === "" && c.newText === "sdk";
check(updatesAtAsk === 1 && (updates[0].content || []).some(isWriteDiff), "diff before the permission request: " + JSON.stringify(updates[0]));
check((updates[2].content || []).some(isWriteDiff), "diff in the completed update: " + JSON.stringify(updates[2]));
check(commands.length === 1 && updatesAtCommands === 0 && Array.isArray(commands[0].availableCommands), "available_commands_update: " + JSON.stringify(commands));
console.log("ok: the official ACP SDK drove acpguard acp");
