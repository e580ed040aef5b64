package p

import (
	http "net/http"
	memmetrics "github.com/subletml/sublet/alloc/memmetrics"
	prometheus "github.com/prometheus/client_golang/prometheus"
	promhttp "github.com/prometheus/client_golang/prometheus/promhttp"
)

func _() {
{
//line alloc/memmetrics/memmetrics.go:3
prometheus.MustRegister(memmetrics.NewCollector(nil)) // nil: alloc.Registered
http.Handle("/metrics", promhttp.Handler())
}
}
