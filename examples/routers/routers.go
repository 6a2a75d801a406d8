// Package routers limits a route of chi, echo and gin with
// httplimit.Middleware, the net/http middleware of the runtime: each
// router takes it as it takes any func(http.Handler) http.Handler, gin
// through a few lines of glue (Gin). It is a module of its own so that
// the core module depends on no router.
package routers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-chi/chi/v5"
	"github.com/labstack/echo/v4"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
)

// searchRule allows each client 2 searches a minute.
var searchRule = &ratelimit.Rule{Name: "search", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 2}}}

// Chi serves GET /search, limited per client IP with the X-RateLimit
// fields beside the IETF ones, and GET /health, which the same
// router-wide middleware skips.
func Chi(limiter ratelimit.Limiter) http.Handler {
	r := chi.NewRouter()
	r.Use(httplimit.Middleware(limiter, searchRule, httplimit.ClientIP(),
		httplimit.WithXRateLimit(),
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/health" })))
	r.Get("/search", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("results\n")) })
	r.Get("/health", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	return r
}

// Echo serves GET /search, limited per client IP with the X-RateLimit
// fields, through echo.WrapMiddleware.
func Echo(limiter ratelimit.Limiter) http.Handler {
	e := echo.New()
	limit := echo.WrapMiddleware(httplimit.Middleware(limiter, searchRule, httplimit.ClientIP(), httplimit.WithXRateLimit()))
	e.GET("/search", func(c echo.Context) error { return c.String(http.StatusOK, "results\n") }, limit)
	return e
}

// GinEngine serves GET /search, limited per client IP with the
// X-RateLimit fields, and answers a denial in JSON (httplimit.JSON) with
// the same status and fields as the others.
func GinEngine(limiter ratelimit.Limiter) http.Handler {
	r := gin.New()
	limit := Gin(httplimit.Middleware(limiter, searchRule, httplimit.ClientIP(),
		httplimit.WithXRateLimit(), httplimit.WithErrorFormat(httplimit.JSON)))
	r.GET("/search", limit, func(c *gin.Context) { c.String(http.StatusOK, "results\n") })
	return r
}

// Gin turns a net/http middleware such as httplimit.Middleware into a gin
// handler: the request goes on down gin's chain when the middleware calls
// its next handler, and the chain is aborted when it answers the request
// itself (a denial).
func Gin(mw func(http.Handler) http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		next := false
		mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			next = true
			c.Request = r
			c.Next()
		})).ServeHTTP(c.Writer, c.Request)
		if !next {
			c.Abort()
		}
	}
}
