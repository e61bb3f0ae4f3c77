package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// The UI is plain HTML, CSS and JavaScript, embedded: no CDN, works
// offline. Pages are routed in the browser (index.html for every path
// that is not a file).
//
//go:embed ui
var uiFiles embed.FS

// csp allows nothing but the UI's own files and API: no inline script, so
// a name that gets into the page as markup still runs nothing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func uiHandler(Config) http.Handler {
	root, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		p := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if p == "" || p == "index.html" {
			serveIndex(w, r, root)
			return
		}
		if st, err := fs.Stat(root, p); err != nil || st.IsDir() {
			if path.Ext(p) != "" {
				http.NotFound(w, r) // a missing asset, not a page
				return
			}
			serveIndex(w, r, root) // a page of the UI: the browser routes it
			return
		}
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

func serveIndex(w http.ResponseWriter, r *http.Request, root fs.FS) {
	b, err := fs.ReadFile(root, "index.html")
	if err != nil {
		http.Error(w, "the UI is not built in", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}
