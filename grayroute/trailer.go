package grayroute

import (
	"io"
	"net/http"
)

// stripTrailer keeps a client-sent copy of the version header out of the
// request trailers. Declared trailers are in r.Trailer with no value until
// the body is read to the end; then net/http fills them in (the same map)
// and reverse_proxy forwards them after the body. So the name is removed
// now, from the declared list, and again at end of body, after net/http
// filled it in and before the proxy copies the trailers.
func stripTrailer(r *http.Request, name string) {
	if r.Trailer == nil {
		return // no trailer declared: net/http fills in none the proxy sees
	}
	// Also when another trailer is declared: net/http then keeps every
	// field of the trailer section, declared or not.
	delete(r.Trailer, name)
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &trailerStripper{ReadCloser: r.Body, trailer: r.Trailer, name: name}
	}
}

type trailerStripper struct {
	io.ReadCloser
	trailer http.Header
	name    string
}

func (b *trailerStripper) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		delete(b.trailer, b.name)
	}
	return n, err
}
