"""datacheck.torch"""
