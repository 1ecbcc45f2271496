package api

// The playground's routes: the page and its assets, and GET /v1/pipeline,
// which the page draws.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/api/playground"
	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/httpbody"
)

// The route labels of the playground's endpoints.
const (
	routePlayground = "playground"
	routePipeline   = "pipeline"
)

// playgroundPrefix is the path under which the page's assets are served.
const playgroundPrefix = "/playground/"

// playgroundCSP keeps the page to its own origin: its scripts, styles and
// API calls come from the server that served it, and nothing else loads.
const playgroundCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// playgroundEndpoints are the playground's rows of a full server's endpoint
// table: the page at / and its assets, served without the API key (they
// are static; every API call the page makes sends the key the user typed),
// and GET /v1/pipeline, which the page draws.
func (s *Server) playgroundEndpoints() []endpoint {
	return []endpoint{
		{"/v1/pipeline", route{name: routePipeline, methods: methods{http.MethodGet: s.pipelineInfo}}},
		{"/{$}", route{name: routePlayground, open: true, methods: methods{http.MethodGet: s.page}}},
		{playgroundPrefix + "{file}", route{name: routePlayground, open: true, methods: methods{http.MethodGet: s.pageAsset}}},
	}
}

// page answers GET / with the playground.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	s.serveAsset(w, r, playground.Index)
}

// pageAsset answers GET /playground/{file} with one of the page's files.
func (s *Server) pageAsset(w http.ResponseWriter, r *http.Request) {
	s.serveAsset(w, r, r.PathValue("file"))
}

// asset is one embedded file of the page, ready to serve.
type asset struct {
	body []byte
	etag string
}

// playgroundAssets reads the embedded page once: its files by name, each
// with an ETag of its content, so that a browser revalidates cheaply and
// never keeps a stale page after an upgrade.
var playgroundAssets = sync.OnceValue(func() map[string]asset {
	assets := map[string]asset{}
	err := fs.WalkDir(playground.Files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(playground.Files, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		assets[name] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("api: reading the embedded playground: " + err.Error()) // a broken build
	}
	return assets
})

// serveAsset writes the page's file name, or the JSON 404 of an unknown
// route.
func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := playgroundAssets()[name]
	if !ok {
		s.notFound(w, r)
		return
	}
	h := w.Header()
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", playgroundCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// ServeContent sets the Content-Type from the name's extension and
	// answers If-None-Match and HEAD.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}

// pipelineInfo answers GET /v1/pipeline.
func (s *Server) pipelineInfo(w http.ResponseWriter, r *http.Request) {
	p, err := s.queryModel(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	httpbody.WriteJSON(w, http.StatusOK, apijson.DescribePipeline(p.cfg))
}
