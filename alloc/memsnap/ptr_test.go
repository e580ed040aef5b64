package memsnap

import "github.com/subletml/sublet/device"

func devicePtr(p uint64) device.Ptr { return device.Ptr(p) }
