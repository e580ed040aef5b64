package p

import (
	named "github.com/subletml/sublet/device/named"
)

func _() {
{
//line device/named/named.go:9
dev, err := named.Default()       // SUBLET_DEVICE, else cuda:0 when usable, else cpu
meta, err := named.Open("sim")    // one device value per name, shared by everyone
n, err := named.Parse("cuda:1")   // a name taken apart, to open a device of one's own
}
}
