package stdtool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/cortexfs/ctx/internal/netpolicy"
)

func init() {
	register(&Tool{
		Name:  "fetch",
		Usage: "fetch URL",
		Min:   1, Max: 1,
		Meta: Meta{Description: `Fetch a web page or file over HTTP(S) (GET) and show it as text.
argv: fetch URL   (http:// or https:// only)
HTML is reduced to readable text: headings (#), paragraphs, list items (-), links as text (url), code blocks; scripts, styles and navigation are dropped. Other text and JSON are shown as they are; images, PDFs and other binary types are refused.
The first line is the final URL (after at most 5 redirects), then the status. At most about 15 KiB is shown; 30 s timeout.
The sandbox has no network unless the agent's .d/mount grants net; this host's loopback and its private networks only as .d/mount's net local HOST:PORT grants name them.
Example: fetch https://pkg.go.dev/regexp/syntax`},
		Run: runFetch,
	})
}

const (
	// fetchMaxBody bounds what fetch reads of a body.
	fetchMaxBody = 5 << 20
	// fetchMaxRedirects bounds the redirects fetch follows.
	fetchMaxRedirects = 5
	fetchUserAgent    = "ctx-fetch/1 (+https://github.com/cortexfs/ctx)"
)

// fetchTimeout bounds a whole fetch; tests lower it.
var fetchTimeout = 30 * time.Second

// noNetworkMsg is what fetch says when the sandbox has no network.
const noNetworkMsg = "no network in this sandbox: the agent's .d/mount does not grant net (add a line `net` to grant it)"

func runFetch(ctx context.Context, a *Args, out *Output) error {
	raw := strings.TrimSpace(a.Arg(0, ""))
	u, err := url.Parse(raw)
	if err != nil {
		return Failf("fetch: %q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Failf("fetch: %q: only http:// and https:// URLs are fetched", raw)
	}
	if u.Host == "" {
		return Failf("fetch: %q has no host", raw)
	}
	netw := fetchNetFromEnv()
	if err := netw.check(u); err != nil {
		return Failf("fetch: %s: %v", raw, err)
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = netw.proxyFor
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > fetchMaxRedirects {
				return fmt.Errorf("more than %d redirects", fetchMaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to %s, not http(s)", req.URL)
			}
			// A public page redirecting to the host's loopback is refused
			// by the same rule as a URL given directly.
			if err := netw.check(req.URL); err != nil {
				return fmt.Errorf("redirected to %s: %w", req.URL, err)
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Failf("fetch: %s: %v", raw, err)
	}
	req.Header.Set("User-Agent", fetchUserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return fetchError(raw, err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	out.Printf("URL: %s\n%s %s\n", final, resp.Proto, resp.Status)

	ctype := resp.Header.Get("Content-Type")
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, fetchMaxBody+1))
	cutBody := len(body) > fetchMaxBody
	if cutBody {
		body = body[:fetchMaxBody]
	}
	if readErr != nil && len(body) == 0 {
		return fetchError(raw, readErr)
	}
	mt, params, _ := mime.ParseMediaType(ctype)
	if mt == "" {
		mt, params, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	var text string
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		text = htmlText(decodeCharset(body, params["charset"]), final)
	case isTextType(mt):
		text = decodeCharset(body, params["charset"])
	default:
		size := "size unknown"
		if resp.ContentLength >= 0 {
			size = countNoun(int(resp.ContentLength), "byte")
		} else if !cutBody {
			size = countNoun(len(body), "byte")
		}
		return Failf("fetch: %s is %s (%s), not text: fetch shows HTML, text and JSON only; save it with bash (curl -sLo FILE URL) if you need it", final, mt, size)
	}
	out.Printf("Content-Type: %s\n\n", mt)
	out.WriteString(strings.TrimSpace(text) + "\n")
	out.Hint = "save the page with bash (curl -sLo FILE URL) and read it with read --offset"
	if cutBody {
		out.Note("[the body is longer than %d MiB: only its start was read]", fetchMaxBody>>20)
	}
	if readErr != nil {
		out.Note("[reading the body failed after %d bytes: %v]", len(body), readErr)
	}
	if resp.StatusCode >= 400 {
		return Failf("fetch: HTTP status %s", resp.Status)
	}
	return nil
}

// fetchError explains a failed request.
func fetchError(raw string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return Failf("fetch: %s: no answer within %s", raw, fetchTimeout)
	}
	return Failf("fetch: %s: %v", raw, unwrapURLError(err))
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// fetchNet is the sandbox's network as its environment describes it: the
// proxy the daemon serves (HTTPS_PROXY, HTTP_PROXY) and the `net local`
// grants (CTX_NET_LOCAL). The environment grants nothing — the sandbox's
// own network namespace and the daemon's proxy decide — it lets fetch
// refuse early and say what to add.
type fetchNet struct {
	proxy map[string]*url.URL // by scheme
	pol   netpolicy.Policy
}

func fetchNetFromEnv() fetchNet {
	n := fetchNet{proxy: map[string]*url.URL{}}
	for scheme, keys := range map[string][]string{"http": {"HTTP_PROXY", "http_proxy"}, "https": {"HTTPS_PROXY", "https_proxy"}} {
		for _, k := range keys {
			if v := os.Getenv(k); v != "" {
				if u, err := url.Parse(v); err == nil && u.Host != "" {
					n.proxy[scheme] = u
					break
				}
			}
		}
	}
	for _, f := range strings.Fields(os.Getenv(netpolicy.EnvLocal)) {
		if ap, err := netpolicy.ParseLocal(f); err == nil {
			n.pol.Local = append(n.pol.Local, ap)
		}
	}
	n.pol.Public = len(n.proxy) > 0
	return n
}

// target is the address a URL names when its host is an IP address (or
// localhost, which is 127.0.0.1 here): ok false for a name.
func target(u *url.URL) (hostport string, ap netip.AddrPort, ok bool) {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	h := u.Hostname()
	hostport = net.JoinHostPort(h, port)
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		h = "127.0.0.1"
	}
	a, err := netip.ParseAddr(h)
	p, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil || a.Zone() != "" {
		return hostport, ap, false
	}
	return hostport, netip.AddrPortFrom(a.Unmap(), uint16(p)), true
}

// check refuses, before any connection, what the sandbox may not reach:
// an address of this host or its networks without a `net local` grant
// naming it, anything at all without `net` (spec: V3, README "The
// network"). A name goes to the proxy, which resolves it and refuses the
// same way.
func (n fetchNet) check(u *url.URL) error {
	hostport, ap, literal := target(u)
	if literal {
		if err := n.pol.Check(hostport, ap); err != nil {
			var r *netpolicy.Refusal
			if errors.As(err, &r) && r.Kind == "" {
				return errors.New(noNetworkMsg)
			}
			msg := "refused: " + err.Error()
			if ap.Addr().IsLoopback() {
				msg += " (localhost in the sandbox is its own, not the host's)"
			}
			if !n.pol.Enabled() {
				msg = noNetworkMsg + "; " + msg
			}
			return errors.New(msg)
		}
		if n.pol.Granted(ap) {
			return nil
		}
	}
	if !n.pol.Public {
		return errors.New(noNetworkMsg)
	}
	return nil
}

// proxyFor is the transport's Proxy: a granted loopback address is
// reached directly (the daemon listens on it inside the sandbox's network
// namespace); everything else through the proxy — Go's
// ProxyFromEnvironment would skip loopback hosts and honour NO_PROXY.
func (n fetchNet) proxyFor(req *http.Request) (*url.URL, error) {
	if _, ap, ok := target(req.URL); ok && ap.Addr().IsLoopback() && n.pol.Granted(ap) {
		return nil, nil
	}
	if p := n.proxy[req.URL.Scheme]; p != nil {
		return p, nil
	}
	return nil, errors.New(noNetworkMsg)
}

// isTextType reports whether the media type mt is shown as it is.
func isTextType(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"),
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"),
		strings.HasSuffix(mt, "+yaml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript",
		"application/x-javascript", "application/ecmascript", "application/yaml",
		"application/x-yaml", "application/toml", "application/x-sh",
		"application/sql", "application/graphql", "application/x-ndjson":
		return true
	}
	return false
}

// decodeCharset is body as UTF-8: ISO-8859-1 (and its common alias,
// windows-1252, whose extra characters are rare) is converted; anything
// else is taken as UTF-8 (invalid bytes are replaced on output).
func decodeCharset(body []byte, charset string) string {
	switch strings.ToLower(charset) {
	case "iso-8859-1", "latin1", "latin-1", "iso8859-1", "windows-1252", "cp1252":
		if utf8.Valid(body) {
			return string(body)
		}
		var b strings.Builder
		for _, c := range body {
			b.WriteRune(rune(c))
		}
		return b.String()
	}
	return string(body)
}

// htmlText reduces an HTML document to readable text.
func htmlText(doc string, base *url.URL) string {
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		return doc
	}
	t := &textWriter{base: base}
	if title := findTitle(root); title != "" {
		t.text("Title: " + title)
		t.block(2)
	}
	t.node(root)
	return t.b.String()
}

func findTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		return strings.Join(strings.Fields(nodeText(n)), " ")
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Body {
		return ""
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := findTitle(c); t != "" {
			return t
		}
	}
	return ""
}

func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// textWriter builds the text: inline text with whitespace collapsed,
// blocks separated by line breaks.
type textWriter struct {
	b     strings.Builder
	base  *url.URL
	nl    int  // trailing newlines written (2 means a blank line)
	space bool // a space is due before the next word
	pre   int  // inside <pre>
}

// htmlDropped are the elements whose content is left out.
var htmlDropped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Nav: true, atom.Head: true,
	atom.Noscript: true, atom.Svg: true, atom.Template: true, atom.Iframe: true,
	atom.Object: true, atom.Button: true, atom.Select: true, atom.Canvas: true,
}

// htmlBlocks are the elements that start and end on their own line; the
// value is the newlines around them (2: a blank line).
var htmlBlocks = map[atom.Atom]int{
	atom.P: 2, atom.H1: 2, atom.H2: 2, atom.H3: 2, atom.H4: 2, atom.H5: 2, atom.H6: 2,
	atom.Pre: 2, atom.Blockquote: 2, atom.Table: 2, atom.Ul: 2, atom.Ol: 2, atom.Dl: 2,
	atom.Figure: 2, atom.Hr: 2, atom.Section: 1, atom.Article: 1, atom.Main: 1,
	atom.Header: 1, atom.Footer: 1, atom.Aside: 1, atom.Div: 1, atom.Li: 1, atom.Tr: 1,
	atom.Dt: 1, atom.Dd: 1, atom.Figcaption: 1, atom.Form: 1, atom.Details: 1,
	atom.Summary: 1, atom.Caption: 1, atom.Address: 1,
}

func (t *textWriter) node(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		if t.pre > 0 {
			t.raw(n.Data)
		} else {
			t.text(n.Data)
		}
		return
	case html.ElementNode:
	case html.DocumentNode:
		t.children(n)
		return
	default:
		return
	}
	a := n.DataAtom
	if htmlDropped[a] {
		return
	}
	if htmlHidden(n) {
		return
	}
	switch a {
	case atom.Br:
		t.block(1)
		return
	case atom.Hr:
		t.block(2)
		t.raw("---")
		t.block(2)
		return
	case atom.Img:
		return
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		t.block(2)
		t.raw(strings.Repeat("#", int(n.Data[1]-'0')) + " ")
		t.children(n)
		t.block(2)
		return
	case atom.Li:
		t.block(1)
		t.raw("- ")
		t.children(n)
		t.block(1)
		return
	case atom.Pre:
		t.block(2)
		t.raw("```\n")
		t.pre++
		t.children(n)
		t.pre--
		if t.nl == 0 {
			t.raw("\n")
		}
		t.raw("```")
		t.block(2)
		return
	case atom.Code:
		if t.pre == 0 {
			if code := strings.Join(strings.Fields(nodeText(n)), " "); code != "" {
				t.word("`" + code + "`")
			}
			return
		}
	case atom.Td, atom.Th:
		if n.PrevSibling != nil {
			t.text(" | ")
		}
		t.children(n)
		return
	case atom.A:
		t.link(n)
		return
	}
	if nl, ok := htmlBlocks[a]; ok {
		t.block(nl)
		t.children(n)
		t.block(nl)
		return
	}
	t.children(n)
}

func (t *textWriter) children(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		t.node(c)
	}
}

// htmlHidden reports an element marked hidden or aria-hidden.
func htmlHidden(n *html.Node) bool {
	for _, at := range n.Attr {
		switch {
		case at.Key == "hidden",
			at.Key == "aria-hidden" && at.Val == "true":
			return true
		}
	}
	return false
}

// link writes an <a>: its text, then its target when that says more.
func (t *textWriter) link(n *html.Node) {
	href := ""
	for _, at := range n.Attr {
		if at.Key == "href" {
			href = strings.TrimSpace(at.Val)
		}
	}
	label := strings.Join(strings.Fields(nodeText(n)), " ")
	if href == "" || strings.HasPrefix(href, "#") || strings.HasPrefix(strings.ToLower(href), "javascript:") {
		t.children(n)
		return
	}
	if u, err := t.base.Parse(href); err == nil {
		href = u.String()
	}
	if label == "" {
		return // an image link or an icon: nothing to read
	}
	t.children(n)
	if label != href {
		t.text(" (" + href + ")")
	}
}

// text writes inline text, whitespace collapsed.
func (t *textWriter) text(s string) {
	if s == "" {
		return
	}
	if isSpace(s[0]) {
		t.space = true
	}
	for i, w := range strings.Fields(s) {
		if i > 0 {
			t.space = true
		}
		t.word(w)
	}
	if isSpace(s[len(s)-1]) {
		t.space = true
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// word writes one word, after a space when one is due.
func (t *textWriter) word(w string) {
	if t.space && t.nl == 0 && t.b.Len() > 0 {
		t.b.WriteByte(' ')
	}
	t.space = false
	t.b.WriteString(w)
	t.nl = 0
}

// raw writes s as it is (in <pre>, and markup of our own).
func (t *textWriter) raw(s string) {
	if s == "" {
		return
	}
	if t.space && t.nl == 0 && t.b.Len() > 0 && t.pre == 0 {
		t.b.WriteByte(' ')
	}
	t.space = false
	t.b.WriteString(s)
	t.nl = len(s) - len(strings.TrimRight(s, "\n"))
	if t.nl == len(s) {
		t.nl = min(len(s), 2)
	}
}

// block ends the current line, with a blank line when n is 2.
func (t *textWriter) block(n int) {
	t.space = false
	if t.b.Len() == 0 {
		return
	}
	for t.nl < n {
		t.b.WriteByte('\n')
		t.nl++
	}
}
