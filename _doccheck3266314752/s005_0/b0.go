package p

import (
	memsnap "github.com/subletml/sublet/alloc/memsnap"
	memviz "github.com/subletml/sublet/alloc/memviz"
	os "os"
)

func _() {
{
//line alloc/memviz/memviz.go:7
s, err := memsnap.ReadFile("snap.pickle")
err = memviz.WriteHTML(os.Stdout, s, memviz.Options{})
}
}
