package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cortexfs/ctx/internal/provider/sse"
)

// maxToolInput bounds one tool call's accumulated input JSON.
const maxToolInput = 1 << 20

var (
	errIdle    = errors.New("idle timeout")
	errTimeout = errors.New("request timeout")
)

// endpoint is the HTTP side shared by both providers.
type endpoint struct {
	name    string // provider name, for messages
	url     string
	host    string // host:port, for messages
	key     Secret
	client  *http.Client
	timeout time.Duration
	idle    time.Duration
}

func newEndpoint(pc ProviderConfig, url string) endpoint {
	// One transport per provider: its idle connections are its own, and
	// CloseIdleConnections releases them.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return endpoint{
		name:    pc.Name,
		url:     url,
		host:    HostPort(url),
		key:     pc.APIKey,
		client:  &http.Client{Transport: tr},
		timeout: or(pc.Timeout, DefaultTimeout),
		idle:    or(pc.IdleTimeout, DefaultIdleTimeout),
	}
}

// stream is an open 200 text/event-stream response.
type stream struct {
	ep     *endpoint
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   context.CancelFunc
	timer  *time.Timer
	body   io.ReadCloser
	events *sse.Reader
}

// open POSTs body and returns the event stream, or a classified error.
func (e *endpoint) open(ctx context.Context, body []byte, header http.Header) (*stream, error) {
	tctx, stop := context.WithTimeoutCause(ctx, e.timeout, errTimeout)
	rctx, cancel := context.WithCancelCause(tctx)
	s := &stream{ep: e, parent: ctx, ctx: rctx, cancel: cancel, stop: stop}
	// The idle timer covers the wait for headers and every gap between reads.
	s.timer = time.AfterFunc(e.idle, func() { cancel(errIdle) })
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w: %w", e.name, ErrConfig, err)
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := e.client.Do(req)
	if err != nil {
		s.Close()
		return nil, s.classify(err)
	}
	s.body = resp.Body
	if resp.StatusCode != http.StatusOK {
		serr := e.statusError(resp)
		s.Close()
		return nil, serr
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		s.Close()
		return nil, fmt.Errorf("%s: %w: content type %q, want text/event-stream", e.name, ErrMalformed, bound(resp.Header.Get("Content-Type"), 100))
	}
	s.events = sse.NewReader(readerFunc(s.read), 0)
	return s, nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func (s *stream) read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 {
		s.timer.Reset(s.ep.idle)
	}
	return n, err
}

// next returns the next SSE event; at the end of the stream it returns an
// ErrIncomplete error naming what was still expected.
func (s *stream) next(expect string) (sse.Event, error) {
	ev, err := s.events.Next()
	if err == nil {
		return ev, nil
	}
	if errors.Is(err, io.EOF) {
		if cerr := s.ctxError(); cerr != nil {
			return ev, cerr
		}
		return ev, fmt.Errorf("%s: %w: no %s", s.ep.name, ErrIncomplete, expect)
	}
	if errors.Is(err, sse.ErrTooLarge) {
		return ev, fmt.Errorf("%s: %w: %w", s.ep.name, ErrMalformed, err)
	}
	if cerr := s.ctxError(); cerr != nil {
		return ev, cerr
	}
	return ev, fmt.Errorf("%s: %w: %w", s.ep.name, ErrIncomplete, err)
}

// ctxError reports the caller's cancellation or one of our own timeouts.
func (s *stream) ctxError() error {
	if err := s.parent.Err(); err != nil {
		return fmt.Errorf("%s: %w", s.ep.name, err)
	}
	switch context.Cause(s.ctx) {
	case nil:
		return nil
	case errIdle:
		return fmt.Errorf("%s: %w to %s: no data for %v", s.ep.name, ErrConnection, s.ep.host, s.ep.idle)
	case errTimeout:
		return fmt.Errorf("%s: %w to %s: request exceeded %v", s.ep.name, ErrConnection, s.ep.host, s.ep.timeout)
	}
	return fmt.Errorf("%s: %w to %s: %w", s.ep.name, ErrConnection, s.ep.host, context.Cause(s.ctx))
}

// classify turns a client.Do error into a connection error (or the caller's
// cancellation), naming the host and port and the innermost cause ("dial
// tcp: lookup api.anthropic.com: no such host", "connection refused"), not
// the URL error's whole chain.
func (s *stream) classify(err error) error {
	if cerr := s.ctxError(); cerr != nil {
		return cerr
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s: %w to %s: %w", s.ep.name, ErrConnection, s.ep.host, err)
}

// HostPort is raw's host:port (the scheme's port when none is written).
func HostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "443"
	if u.Scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Close aborts the request (closing the connection if the body was not
// drained) and stops the timers.
func (s *stream) Close() {
	s.timer.Stop()
	s.cancel(context.Canceled)
	s.stop()
	if s.body != nil {
		_ = s.body.Close()
	}
}

// statusError reads a bounded error body and builds a StatusError whose text
// cannot contain the key, even if the server echoed it.
func (e *endpoint) statusError(resp *http.Response) *StatusError {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	se := &StatusError{
		Provider:   e.name,
		Code:       resp.StatusCode,
		RetryAfter: retryAfter(resp.Header, time.Now()),
		RequestID:  bound(firstHeader(resp.Header, "request-id", "x-request-id"), 100),
	}
	// Anthropic: {"type":"error","error":{"type":..,"message":..}};
	// OpenAI: {"error":{"message":..,"type":..,"code":..}}.
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && (body.Error.Message != "" || body.Error.Type != "") {
		se.Type, se.Message = body.Error.Type, body.Error.Message
	} else {
		se.Message = strings.TrimSpace(string(data))
	}
	// Redact before bounding: a key cut by the bound would survive as a prefix.
	se.Type = bound(e.redact(se.Type), 100)
	se.Message = bound(e.redact(strings.ToValidUTF8(se.Message, "\uFFFD")), 512)
	return se
}

// fieldError turns the payload of an SSE "error" field (llama.cpp's server:
// {"code":400,"message":"...","type":"exceed_context_size_error"}; some
// proxies wrap it as {"error":{...}}) into a StatusError carrying the
// server's code and message. A 4xx is not retried (Dispatcher); a payload
// without a usable code counts as a server error (500).
func (e *endpoint) fieldError(payload string) *StatusError {
	type body struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
	}
	var b struct {
		body
		Error *body `json:"error"`
	}
	se := &StatusError{Provider: e.name, Code: 500}
	if json.Unmarshal([]byte(payload), &b) != nil {
		se.Message = payload
	} else {
		x := b.body
		if b.Error != nil {
			x = *b.Error
		}
		se.Type, se.Message = x.Type, x.Message
		if n, err := strconv.Atoi(strings.Trim(string(x.Code), `"`)); err == nil && n >= 400 && n < 600 {
			se.Code = n
		}
		if se.Message == "" && se.Type == "" {
			se.Message = payload
		}
	}
	se.Type = bound(e.redact(strings.ToValidUTF8(se.Type, "\uFFFD")), 100)
	se.Message = bound(e.redact(strings.ToValidUTF8(se.Message, "\uFFFD")), 512)
	return se
}

// redact removes the key from text that came from the server. spec: D9
func (e *endpoint) redact(s string) string {
	if k := e.key.Reveal(); len(k) >= 4 {
		s = strings.ReplaceAll(s, k, redacted)
	}
	return s
}

func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// retryAfter reads retry-after-ms (OpenAI) or retry-after (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e6 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// pump reads events until the decoder reports the end of the message. A
// read error goes through onNextErr when given; a decode error after a
// cancel is reported as the cancel.
func (s *stream) pump(end string, event func(string, func(Event) error) (bool, error), send func(Event) error, onNextErr func(error) error) error {
	for {
		ev, err := s.next(end)
		if err != nil {
			if onNextErr != nil {
				return onNextErr(err)
			}
			return err
		}
		if ev.Error != "" {
			// spec: the server's own failure report.
			return s.ep.fieldError(ev.Error)
		}
		done, err := event(ev.Data, send)
		if err != nil {
			if cerr := s.ctxError(); cerr != nil {
				return cerr
			}
			return err
		}
		if done {
			return nil
		}
	}
}
