package tools_test

import (
	"github.com/wfc-lang/wfc/runtime"
	"github.com/wfc-lang/wfc/runtime/agent/tools"
)

// The runtime's blob store is the tools' BlobStore.
var _ tools.BlobStore = (*runtime.RunBlobs)(nil)
