package console

import (
	"net/http"
	"net/url"
)

// refuseCrossOrigin answers a write refused as coming from another
// origin: by http.CrossOriginProtection, or by checkReferer.
var refuseCrossOrigin = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "cross-origin request refused", http.StatusForbidden)
})

// checkReferer refuses a write whose only sign of where it came from is
// its Referer, unless that names an origin cop accepts: the console's own
// host, a trusted origin, a bypassed path. cop reads Sec-Fetch-Site and
// Origin alone and lets a request with neither through, yet a browser old
// enough to send neither on a cross-site form still sends its Referer
// (unless the page withholds it): that Referer is the only sign of a
// forged write left to read.
//
// A write with none of the three headers still passes: it is what curl or
// a script sends to the JSON API, and every browser of the last years
// sends Origin on a POST (and Sec-Fetch-Site to https and localhost), so a
// write forged through one carries one of them. Refusing it would break
// every client that is not a browser, to stop only a browser that old on
// a page that also withholds its Referer.
func checkReferer(cop *http.CrossOriginProtection, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refererRefused(cop, r) {
			refuseCrossOrigin.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refererRefused reports whether r is a write that cop would refuse with
// its Referer's origin as its Origin. A Referer that is no absolute URL
// reads as the origin "null", which cop refuses as browsers send it for
// an opaque origin and no trusted origin can be.
func refererRefused(cop *http.CrossOriginProtection, r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	h := r.Header
	ref := h.Get("Referer")
	if ref == "" || h.Get("Origin") != "" || h.Get("Sec-Fetch-Site") != "" {
		return false
	}
	origin := "null"
	if u, err := url.Parse(ref); err == nil && u.Scheme != "" && u.Host != "" {
		origin = u.Scheme + "://" + u.Host
	}
	r = r.Clone(r.Context())
	r.Header.Set("Origin", origin)
	return cop.Check(r) != nil
}
