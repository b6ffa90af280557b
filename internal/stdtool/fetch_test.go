package stdtool

import (
	"github.com/cortexfs/ctx/internal/netpolicy"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const testPage = `<!DOCTYPE html>
<html><head><title>The  Title</title><style>body{color:red}</style>
<script>var x = "script text";</script></head>
<body>
<nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
<h1>Main   heading</h1>
<p>First paragraph with
   a <a href="/docs/x?y=1">relative link</a>, an <a href="https://other.example/">absolute one</a>
   and <code>inline  code</code>.</p>
<h2>List</h2>
<ul><li>one</li><li>two <b>bold</b></li></ul>
<pre>line 1
    indented line 2</pre>
<div hidden>hidden text</div>
<noscript>enable js</noscript>
<svg><text>svg text</text></svg>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<p>caf&eacute; &amp; more<br>next line</p>
</body></html>`

// fetchServer serves the cases fetch is tested with.
func fetchServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(testPage))
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=ISO-8859-1")
		w.Write([]byte("caf\xe9\n"))
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"a": [1, 2],  "b": "<p>"}`))
	})
	mux.HandleFunc("/png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(make([]byte, 1234))
	})
	mux.HandleFunc("/sniffed", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // no type: fetch sniffs the body
		w.Write([]byte("\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 100)))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := strings.Repeat("z", 99) + "\n"
		for range (fetchMaxBody + 1<<20) / len(line) {
			w.Write([]byte(line))
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("no such page\n"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/json", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/toftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://example.com/x", http.StatusFound)
	})
	mux.HandleFunc("/ua", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(r.UserAgent()))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// the test server is on loopback: granted as a `net local` line would
	fetchEnv(t, "", srv.Listener.Addr().String())
	return srv
}

// fetchEnv sets the environment a sandbox gets: the proxy ("" for none)
// and the `net local` grants.
func fetchEnv(t *testing.T, proxy, local string) {
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		t.Setenv(k, proxy)
	}
	t.Setenv(netpolicy.EnvLocal, local)
}

// TestFetch: HTML reduced to text, text and JSON as they are, other types
// refused, redirects bounded, the status first.
// The standard toolset: fetch URL.
func TestFetch(t *testing.T) {
	srv := fetchServer(t)
	u := srv.URL
	head := func(path, ctype string) string {
		return "URL: " + u + path + "\nHTTP/1.1 200 OK\nContent-Type: " + ctype + "\n\n"
	}
	cases := []struct {
		name, url, want string
		code            int
	}{
		{"html reduced", u + "/page", head("/page", "text/html") + `Title: The Title

# Main heading

First paragraph with a relative link (` + u + `/docs/x?y=1), an absolute one (https://other.example/) and ` + "`inline code`" + `.

## List

- one
- two bold

` + "```" + `
line 1
    indented line 2
` + "```" + `

k | v
a | 1

café & more
next line
`, 0},
		{"json as is", u + "/json", head("/json", "application/json") + `{"a": [1, 2],  "b": "<p>"}` + "\n", 0},
		{"latin-1", u + "/latin1", head("/latin1", "text/plain") + "café\n", 0},
		{"redirect followed", u + "/redirect", "URL: " + u + "/json\nHTTP/1.1 200 OK\nContent-Type: application/json\n\n" + `{"a": [1, 2],  "b": "<p>"}` + "\n", 0},
		{"binary refused", u + "/png", "URL: " + u + "/png\nHTTP/1.1 200 OK\nfetch: " + u + "/png is image/png (1234 bytes), not text: fetch shows HTML, text and JSON only; save it with bash (curl -sLo FILE URL) if you need it\n", 1},
		{"sniffed binary refused", u + "/sniffed", "URL: " + u + "/sniffed\nHTTP/1.1 200 OK\nfetch: " + u + "/sniffed is image/png (108 bytes), not text: fetch shows HTML, text and JSON only; save it with bash (curl -sLo FILE URL) if you need it\n", 1},
		{"status 404", u + "/missing", "URL: " + u + "/missing\nHTTP/1.1 404 Not Found\nContent-Type: text/plain\n\nno such page\nfetch: HTTP status 404 Not Found\n", 1},
		{"redirect loop", u + "/loop", "fetch: " + u + "/loop: more than 5 redirects\n", 1},
		{"redirect to ftp", u + "/toftp", "fetch: " + u + "/toftp: redirected to ftp://example.com/x, not http(s)\n", 1},
		{"user agent", u + "/ua", head("/ua", "text/plain") + fetchUserAgent + "\n", 0},
		{"file scheme", "file:///etc/passwd", "fetch: \"file:///etc/passwd\": only http:// and https:// URLs are fetched\n", 1},
		{"no scheme", "example.com", "fetch: \"example.com\": only http:// and https:// URLs are fetched\n", 1},
		{"no host", "http:///x", "fetch: \"http:///x\" has no host\n", 1},
		{"bad url", "http://a b/", "fetch: \"http://a b/\" is not a URL: parse \"http://a b/\": invalid character \" \" in host name\n", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, code := searchRun(t, "fetch", c.url)
			if got != c.want || code != c.code {
				t.Errorf("fetch %s: exit %d\n%s\nwant exit %d\n%s", c.url, code, got, c.code, c.want)
			}
		})
	}
}

// TestFetchBounds: the body read is bounded (and said so), the output is
// cut within the budget with a hint, and a slow server times out.
// The standard toolset: size bound, timeout.
func TestFetchBounds(t *testing.T) {
	srv := fetchServer(t)
	got, code := searchRun(t, "fetch", srv.URL+"/big")
	if code != 0 || len(got) > Budget+400 ||
		!strings.Contains(got, " not shown; save the page with bash (curl -sLo FILE URL) and read it with read --offset]\n") ||
		!strings.HasSuffix(got, "[the body is longer than 5 MiB: only its start was read]\n") {
		t.Errorf("big: exit %d, %d bytes, ends %q", code, len(got), got[max(0, len(got)-300):])
	}
	old := fetchTimeout
	fetchTimeout = 200 * time.Millisecond
	t.Cleanup(func() { fetchTimeout = old })
	start := time.Now()
	got, code = searchRun(t, "fetch", srv.URL+"/slow")
	if code != 1 || got != "fetch: "+srv.URL+"/slow: no answer within 200ms\n" || time.Since(start) > 3*time.Second {
		t.Errorf("slow: exit %d after %s: %q", code, time.Since(start), got)
	}
}

// TestFetchNoNetwork: with no proxy in the environment (no `net`), fetch
// says the sandbox has no network and how to grant it, before connecting.
// spec: V1
func TestFetchNoNetwork(t *testing.T) {
	fetchEnv(t, "", "")
	for _, u := range []string{"http://example.com/", "https://93.184.215.14/x"} {
		got, code := searchRun(t, "fetch", u)
		if code != 1 || got != "fetch: "+u+": "+noNetworkMsg+"\n" {
			t.Errorf("%s: exit %d: %q", u, code, got)
		}
	}
}

// TestFetchRefusesLocal: loopback, private and link-local addresses are
// refused by fetch itself, naming the `net local` grant to add, with or
// without net; a granted loopback address is reached directly, another
// port of it is not. spec: V3 (README "The network")
func TestFetchRefusesLocal(t *testing.T) {
	srv := fetchServer(t) // granted by fetchServer
	for _, proxy := range []string{"", "http://127.0.0.1:9/"} {
		fetchEnv(t, proxy, srv.Listener.Addr().String())
		cases := []struct{ url, grant string }{
			{"http://127.0.0.1:1/", "net local 127.0.0.1:1"},
			{"http://localhost:2/x", "net local 127.0.0.1:2"},
			{"http://[::1]:3/", "net local [::1]:3"},
			{"http://10.1.2.3/", "net local 10.1.2.3:80"},
			{"https://192.168.0.1/", "net local 192.168.0.1:443"},
			{"http://169.254.169.254/latest/meta-data/", "net local 169.254.169.254:80"},
			{"http://[fd00::1]:8080/", "net local [fd00::1]:8080"},
			{"http://[::ffff:127.0.0.1]:4/", "net local 127.0.0.1:4"},
		}
		for _, c := range cases {
			got, code := searchRun(t, "fetch", c.url)
			if code != 1 || !strings.Contains(got, "refused: ") || !strings.Contains(got, "`"+c.grant+"`") {
				t.Errorf("proxy %q: %s: exit %d: %q", proxy, c.url, code, got)
			}
		}
		got, code := searchRun(t, "fetch", srv.URL+"/json")
		if code != 0 || !strings.Contains(got, "200 OK") {
			t.Errorf("proxy %q: granted loopback: exit %d: %q", proxy, code, got)
		}
	}
}
