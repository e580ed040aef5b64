package p

import (
	memmetrics "github.com/subletml/sublet/alloc/memmetrics"
	prometheus "github.com/prometheus/client_golang/prometheus"
)

func _() {
{
//line docs/observability.md:75
prometheus.MustRegister(memmetrics.NewCollector(nil))   // every device used

}
}
