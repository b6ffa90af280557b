// Package ctxterm owns a pseudo-terminal running one program and serves it
// to many watch (read-only) and attach (read-write) clients over a unix
// socket (runtime.md T2, S5).
//
// # Wire protocol (version 1; also ctxterm/PROTOCOL.md)
//
// The client opens the socket and sends one JSON line of at most
// MaxHelloLen bytes:
//
//	{"v":1,"mode":"watch"|"attach","cols":N,"rows":N}\n
//
// ("v" optional; cols/rows optional, applied only for attach). After that
// both sides send binary frames:
//
//	[type byte][length uint32 big-endian][payload: length bytes, <= MaxPayload]
//
//	0x01 data    both ways: terminal output / attach input (dropped from watch)
//	0x02 resize  client → server: cols uint16 BE, rows uint16 BE (attach only)
//	0x03 exit    server → client: status int32 BE (128+N if killed by signal N); last frame
//	0x04 error   server → client: UTF-8 reason; the server then closes
//	0x05 ready   server → client: JSON {"v","mode","pid","cols","rows"}; first frame
//
// The server checks SO_PEERCRED before reading the hello; a refused peer gets
// an error frame. It then sends ready, a replay of up to Scrollback bytes of
// recent output as data frames, and live output. A bad hello, an unknown
// frame type, an oversized length, a malformed payload, or a server-only
// frame from a client gets an error frame and that connection is closed; the
// others are unaffected. A client whose unsent output exceeds ClientQueue
// bytes is dropped with an error frame (best effort). When the program ends,
// every client gets an exit frame and the socket is removed.
package ctxterm
