// Package docsection replaces a generated section of a document (the README's tables of benchmark figures,
// mutation scores and test times) between its begin and end markers, leaving the rest byte for byte.
package docsection

import (
	"bytes"
	"fmt"
)

// Splice replaces the text between begin and end in doc by section (after a newline that follows begin).
// The markers must both be there, begin first.
func Splice(doc []byte, begin, end, section string) ([]byte, error) {
	b := bytes.Index(doc, []byte(begin))
	e := bytes.Index(doc, []byte(end))
	if b < 0 || e < b {
		return nil, fmt.Errorf("the markers %q and %q are not in order in the document", begin, end)
	}
	var out bytes.Buffer
	out.Write(doc[:b+len(begin)])
	out.WriteString("\n" + section)
	out.Write(doc[e:])
	return out.Bytes(), nil
}
