"""One module per descriptor kind; :mod:`.factory` maps hipdnnBackendDescriptorType_t to classes."""
