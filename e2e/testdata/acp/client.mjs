// client.mjs — an ACP client built with the official TypeScript SDK
// (@agentclientprotocol/sdk), driving an agent command through a plan, for
// e2e/acp_test.go (issue 14). Usage:
//
//   node client.mjs PLAN_JSON -- COMMAND ARGS...
//
// PLAN: {"cwd": DIR, "load": SESSION_ID?, "prompts": [{"text": T,
// "answer": "allow"|"reject"|"none", "cancelOnChunk": bool}]}.
// It prints one JSON object per line: {"ev":"session","id"} after
// session/new or session/load, {"ev":"update","u"} per session/update,
// {"ev":"permission","params","answer"}, {"ev":"result","stopReason"} or
// {"ev":"error","error"} per prompt, {"ev":"first_chunk","ms"} (time from
// sending the prompt to the first agent_message_chunk), then {"ev":"end"}.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const sep = process.argv.indexOf("--");
const plan = JSON.parse(process.argv[2]);
const cmd = process.argv.slice(sep + 1);
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const child = spawn(cmd[0], cmd.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

let current = null; // the prompt in flight: {answer, cancelOnChunk, t0, sawChunk}
let sessionId = null;
let ctxRef = null;

const app = acp.client({ name: "ctx-e2e-client" })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    out({ ev: "update", u: params.update });
    if (current && params.update.sessionUpdate === "agent_message_chunk" && !current.sawChunk) {
      current.sawChunk = true;
      out({ ev: "first_chunk", ms: performance.now() - current.t0 });
      if (current.cancelOnChunk) {
        await ctxRef.notify(acp.methods.agent.session.cancel, { sessionId });
      }
    }
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    const answer = current ? current.answer : "reject";
    out({ ev: "permission", params, answer });
    if (answer === "none") {
      return new Promise(() => {}); // never answers
    }
    const kind = answer === "allow" ? "allow_once" : "reject_once";
    const opt = params.options.find((o) => o.kind === kind);
    return { outcome: { outcome: "selected", optionId: opt.optionId } };
  });

try {
  await app.connectWith(stream, async (ctx) => {
    ctxRef = ctx;
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    });
    out({ ev: "initialize", init });
    if (plan.load) {
      await ctx.request(acp.methods.agent.session.load, { sessionId: plan.load, cwd: plan.cwd, mcpServers: [] });
      sessionId = plan.load;
    } else {
      const s = await ctx.request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers: [] });
      sessionId = s.sessionId;
    }
    out({ ev: "session", id: sessionId });
    for (const p of plan.prompts || []) {
      current = { ...p, t0: performance.now(), sawChunk: false };
      try {
        const r = await ctx.request(acp.methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text: p.text }],
        });
        out({ ev: "result", stopReason: r.stopReason });
      } catch (e) {
        out({ ev: "error", error: { code: e.code, message: e.message, data: e.data } });
      }
      current = null;
    }
  });
} catch (e) {
  out({ ev: "fatal", error: String(e && e.stack || e) });
}
out({ ev: "end" });
child.stdin.end();
await new Promise((res) => child.on("exit", res));
process.exit(0);
