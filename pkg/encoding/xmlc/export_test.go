package xmlc

// ForceXML makes c keep the XML model's coding even where plain zstd or
// storing would be smaller, so that tests reach it on small documents.
func ForceXML(c *Codec) { c.forceXML = true }

// IsXMLMode reports whether a payload was coded with the XML model.
func IsXMLMode(payload []byte) bool {
	m := payload[0] &^ modeModel
	return m == modeXMLZ || m == modeXMLRaw
}

// RawMain makes c store the main stream uncompressed (and keep the XML
// coding), so that fuzzing mutates the structure and columns directly.
func RawMain(c *Codec) { c.forceXML, c.rawMain = true, true }
