package demo

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table writes rows of cells under header, each line indented by indent: the first
// column left-aligned, the others right-aligned, two spaces apart. A row may have fewer
// cells than the header.
func Table(out io.Writer, indent string, header []string, rows [][]string) {
	widths := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range append([][]string{header}, rows...) {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	}
}
