package p

import (
	http "net/http"
	memprof "github.com/subletml/sublet/alloc/memprof"
)

func _() {
{
//line docs/observability.md:65
memprof.Write(f, a)                                        // go tool pprof -top FILE
http.Handle("/debug/sublet/memory", memprof.Handler(nil))  // go tool pprof -http : URL

}
}
