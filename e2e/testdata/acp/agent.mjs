#!/usr/bin/env node
// agent.mjs — an ACP agent built with the official TypeScript SDK
// (@agentclientprotocol/sdk, its agent API), run by e2e/acp_agent_test.go
// as an acp-v1 ctx agent (issue 14 item 2). What it does depends on the
// prompt's first word:
//
//   work HOSTFILE  read /workspace/in.txt; write /workspace/out.txt; try to
//                  write HOSTFILE and /home/agent/ro.txt (both must be
//                  refused); run a terminal command; say what happened
//   ask            request permission; write /workspace/perm.txt if allowed
//   slow           send one chunk, then wait for session/cancel
//   flood          send 10,050 message chunks
//   big            send one 3 MiB chunk of "<" (6 MiB once JSON-escaped by Go)
//   calls          report 9 tool calls
//   terms          start 9 terminals (the 9th must be refused)
//   env            say which environment it got
//   shell          spawn `sh -c 'command -v ls'` itself; say its output and exit
//   many N M       N times: report an execute call (rawInput command, pending),
//                  run it through a terminal, end it with rawOutput only;
//                  then M more reported calls; say "many done"
//   hang           send one chunk, then nothing (SIGTERM ignored): the
//                  run's idle bound must end it
//   fsops B64      B64 is base64 JSON [{op:"read"|"write", path, content}]:
//                  issue each fs request in order, each bounded to 5 s (a
//                  hang is reported as "timeout"), and say
//                  fsres=<JSON [{path, op, ok, code, msg, content}]>
//   images         say images=<count> and, per image block, <mimeType>:<sha256
//                  of its decoded data>
//
// With --mute it never answers anything (the run's timeout must end it).
// With --images its initialize answer advertises promptCapabilities.image.
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";

if (process.argv.includes("--mute")) {
  process.stdin.resume();
  setInterval(() => {}, 1 << 30);
} else {
  const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
  const cancelled = new Map(); // sessionId → resolve

  const say = (client, sessionId, text) =>
    client.notify(acp.methods.client.session.update, {
      sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
    });
  const call = (client, sessionId, toolCallId, title, kind) =>
    client.notify(acp.methods.client.session.update, {
      sessionId,
      update: { sessionUpdate: "tool_call", toolCallId, title, kind, status: "in_progress" },
    });
  const done = (client, sessionId, toolCallId, text, failed) =>
    client.notify(acp.methods.client.session.update, {
      sessionId,
      update: {
        sessionUpdate: "tool_call_update", toolCallId, status: failed ? "failed" : "completed",
        content: [{ type: "content", content: { type: "text", text } }],
      },
    });
  const attempt = async (f) => {
    try {
      return { ok: true, v: await f() };
    } catch (e) {
      return { ok: false, e: String(e && e.message || e) };
    }
  };

  const app = acp.agent({ name: "ctx-e2e-agent" })
    .onRequest(acp.methods.agent.initialize, async () => ({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: process.argv.includes("--images")
        ? { loadSession: false, promptCapabilities: { image: true } }
        : { loadSession: false },
      authMethods: [],
    }))
    .onRequest(acp.methods.agent.session.new, async ({ params }) => ({ sessionId: "s-" + params.cwd.length }))
    .onNotification(acp.methods.agent.session.cancel, async ({ params }) => {
      const r = cancelled.get(params.sessionId);
      if (r) r();
    })
    .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
      const sid = params.sessionId;
      const text = params.prompt.map((b) => b.text || "").join("");
      const [mode, arg] = text.split(/\s+/);
      if (mode === "work") {
        await call(client, sid, "read-1", "read in.txt", "read");
        const r = await client.request(acp.methods.client.fs.readTextFile, { sessionId: sid, path: "/workspace/in.txt" });
        await done(client, sid, "read-1", r.content);
        await call(client, sid, "write-1", "write out.txt", "edit");
        await client.request(acp.methods.client.fs.writeTextFile, { sessionId: sid, path: "/workspace/out.txt", content: "written by acp: " + r.content });
        await done(client, sid, "write-1", "ok");
        const outside = await attempt(() => client.request(acp.methods.client.fs.writeTextFile, { sessionId: sid, path: arg, content: "pwned" }));
        const home = await attempt(() => client.request(acp.methods.client.fs.writeTextFile, { sessionId: sid, path: "/home/agent/ro.txt", content: "pwned" }));
        const term = await client.createTerminal({ sessionId: sid, command: "sh", args: ["-c", "echo term-says-$((6*7)); cat /workspace/in.txt"] });
        const exit = await term.waitForExit();
        const out = await term.currentOutput();
        await term.release();
        await say(client, sid, `read=${r.content.trim()} outside=${outside.ok ? "written" : "refused"} home=${home.ok ? "written" : "refused"} `);
        await say(client, sid, `exit=${exit.exitCode} term=${out.output.trim().replace(/\n/g, "|")}`);
        return { stopReason: "end_turn" };
      }
      if (mode === "images") {
        const ims = params.prompt.filter((b) => b.type === "image");
        const each = ims.map((b) => b.mimeType + ":" + createHash("sha256").update(Buffer.from(b.data, "base64")).digest("hex"));
        await say(client, sid, `images=${ims.length} ${each.join(" ")}`);
        return { stopReason: "end_turn" };
      }
      if (mode === "ask") {
        const p = await client.request(acp.methods.client.session.requestPermission, {
          sessionId: sid,
          toolCall: { toolCallId: "perm-1", title: "write perm.txt" },
          options: [
            { optionId: "yes", name: "Allow", kind: "allow_once" },
            { optionId: "no", name: "Reject", kind: "reject_once" },
          ],
        });
        const allowed = p.outcome.outcome === "selected" && p.outcome.optionId === "yes";
        if (allowed) {
          await client.request(acp.methods.client.fs.writeTextFile, { sessionId: sid, path: "/workspace/perm.txt", content: "allowed" });
        }
        await say(client, sid, allowed ? "permission=allowed" : "permission=denied");
        return { stopReason: "end_turn" };
      }
      if (mode === "dangling") {
        await call(client, sid, "c-dangling", "never finished", "other");
        await say(client, sid, "done anyway");
        return { stopReason: "end_turn" };
      }
      if (mode === "slow") {
        await call(client, sid, "c-slow", "long step", "other");
        await say(client, sid, "working");
        await new Promise((res) => cancelled.set(sid, res));
        return { stopReason: "cancelled" };
      }
      if (mode === "big") {
        await say(client, sid, "<".repeat(3 << 20));
        return { stopReason: "end_turn" };
      }
      if (mode === "flood") {
        for (let i = 0; i < 10050; i++) {
          await say(client, sid, "x");
        }
        return { stopReason: "end_turn" };
      }
      if (mode === "calls") {
        for (let i = 1; i <= 9; i++) {
          await call(client, sid, "c-" + i, "step " + i, "other");
          await done(client, sid, "c-" + i, "ok " + i);
        }
        await say(client, sid, "nine calls");
        return { stopReason: "end_turn" };
      }
      if (mode === "terms") {
        for (let i = 1; i <= 9; i++) {
          const t = await attempt(() => client.createTerminal({ sessionId: sid, command: "true" }));
          if (t.ok) {
            await t.v.waitForExit();
            await t.v.release();
          }
        }
        return { stopReason: "end_turn" };
      }
      if (mode === "fsops") {
        const ops = JSON.parse(Buffer.from(arg, "base64").toString());
        const res = [];
        for (const o of ops) {
          const req = o.op === "read"
            ? client.request(acp.methods.client.fs.readTextFile, { sessionId: sid, path: o.path })
            : client.request(acp.methods.client.fs.writeTextFile, { sessionId: sid, path: o.path, content: o.content });
          const timeout = new Promise((resolve) => setTimeout(() => resolve("timeout"), 5000));
          let r;
          try {
            const v = await Promise.race([req, timeout]);
            r = v === "timeout" ? { ok: false, code: "timeout" } : { ok: true, content: v && v.content };
          } catch (e) {
            r = { ok: false, code: e && e.code, msg: String(e && e.message || e) };
          }
          res.push({ path: o.path, op: o.op, ...r });
        }
        await say(client, sid, "fsres=" + JSON.stringify(res));
        return { stopReason: "end_turn" };
      }
      if (mode === "shell") {
        // As agents that hand their own PATH on to the shell they spawn do.
        const r = spawnSync("/bin/sh", ["-c", "command -v ls"], { encoding: "utf8", env: { ...process.env, PATH: process.env.PATH ?? "" } });
        await say(client, sid, `ls=${(r.stdout || "").trim()} code=${r.status} err=${r.error ? r.error.code : ""}`);
        return { stopReason: "end_turn" };
      }
      if (mode === "many") {
        const n = Number(text.split(/\s+/)[1]), m = Number(text.split(/\s+/)[2] || 0);
        for (let i = 1; i <= n; i++) {
          const id = "run-" + i, cmd = `echo cmd-${i}-$((${i}*2))`;
          await client.notify(acp.methods.client.session.update, {
            sessionId: sid,
            update: { sessionUpdate: "tool_call", toolCallId: id, title: "Terminal", kind: "execute", status: "pending", rawInput: { command: cmd } },
          });
          const t = await client.createTerminal({ sessionId: sid, command: cmd });
          await t.waitForExit();
          const out = await t.currentOutput();
          await t.release();
          await client.notify(acp.methods.client.session.update, {
            sessionId: sid,
            update: { sessionUpdate: "tool_call_update", toolCallId: id, status: "completed", rawOutput: { output: out.output, exitCode: 0 } },
          });
        }
        for (let i = 1; i <= m; i++) {
          await call(client, sid, "more-" + i, "step " + i, "other");
          await done(client, sid, "more-" + i, "ok " + i);
        }
        await say(client, sid, "many done");
        return { stopReason: "end_turn" };
      }
      if (mode === "hang") {
        process.on("SIGTERM", () => {});
        await say(client, sid, "thinking");
        await new Promise(() => {});
      }
      if (mode === "env") {
        await say(client, sid, `secret=${process.env.ACP_SECRET} other=${process.env.OTHER_SECRET} ctx_run=${process.env.CTX_RUN ? "set" : "unset"} path=${process.env.PATH}`);
        return { stopReason: "end_turn" };
      }
      await say(client, sid, "unknown mode " + mode);
      return { stopReason: "end_turn" };
    });

  const conn = app.connect(stream);
  await conn.closed;
}
