#!/usr/bin/env python3
"""Wrong: refuses every request that has a document, whether or not the policy demands a refusal."""
import sys

from reference_packer import serve


def refuse(request):
    if not request["documents"]:
        return False
    sys.stdout.write("{\"record\":\"error\",\"id\":%d,\"message\":\"documents are not my job\"}\n" % request["id"])
    sys.stdout.flush()
    return True


serve(refuse)
