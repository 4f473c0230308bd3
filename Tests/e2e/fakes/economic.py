"""Fake e-conomic REST API: GET /invoices/drafts (economic-rest.md), Python stdlib only.

state:
  app_secret, grant   the accepted X-AppSecretToken / X-AgreementGrantToken
  drafts              list of draft dicts (full e-conomic shape, see draft())
  revoked             if true, every request fails 401 as after a revoked grant
  retry_after         if set, answer 429 with this Retry-After
  fail_page           if set (int skippages), that page answers 500
  malformed_page      if set, that page answers 200 with a truncated JSON body
Each error body is e-conomic's {message, errorCode, developerHint, logId, httpStatusCode, logTime}.
"""
from __future__ import annotations

import itertools

from fakes.server import FakeHandler, FakeServer

_log_ids = itertools.count(1)


def error(status, message, code, hint, headers=None):
    log_id = f"0HN8TEST{next(_log_ids):04d}"
    body = {"message": message, "errorCode": code, "developerHint": hint, "logId": log_id,
            "httpStatusCode": status, "logTime": "2026-11-20T09:15:00"}
    return status, headers or {}, body


def draft(number, customer=101, name="Nordic Ventilation A/S", net=1000.0, vat=None, currency="DKK",
          date="2026-11-20", due="2026-12-04", heading="Order 2547", base="https://restapi.e-conomic.com"):
    vat = round(net * 0.25, 2) if vat is None else vat
    return {
        "draftInvoiceNumber": number, "date": date, "dueDate": due, "currency": currency,
        "exchangeRate": 100.0, "netAmount": net, "netAmountInBaseCurrency": net, "vatAmount": vat,
        "grossAmount": round(net + vat, 2), "grossAmountInBaseCurrency": round(net + vat, 2),
        "customer": {"customerNumber": customer, "self": f"{base}/customers/{customer}"},
        "recipient": {"name": name, "address": "Vestergade 1", "zip": "8000", "city": "Aarhus C",
                      "vatZone": {"vatZoneNumber": 1, "self": f"{base}/vat-zones/1"}},
        "notes": {"heading": heading},
        "lastUpdated": "2026-11-20T09:15:00Z",
        "pdf": {"download": f"{base}/invoices/drafts/{number}/pdf"},
        "self": f"{base}/invoices/drafts/{number}",
    }


class EconomicHandler(FakeHandler):
    def base(self, req):
        return f"http://{req.headers.get('host')}"

    def route(self, req):
        st = self.state
        if req.headers.get("x-appsecrettoken") != st["app_secret"] or req.headers.get("x-agreementgranttoken") != st["grant"]:
            return error(401, "Authorization not valid.", "E04010",
                         "Check that the X-AppSecretToken and X-AgreementGrantToken headers are valid.")
        if st.get("revoked"):
            return error(401, "The agreement grant token has been revoked by the user.", "E04010",
                         "Ask the agreement owner to grant access again.")
        if st.get("retry_after"):
            return error(429, "Too many requests.", "E07000", "Slow down.", {"Retry-After": str(st["retry_after"])})
        if req.method != "GET" or req.path != "/invoices/drafts":
            return error(404, "The requested resource was not found.", "E00404", "Check the URL.")
        try:
            skip = int(req.query.get("skippages", ["0"])[0])
            size = int(req.query.get("pagesize", ["20"])[0])
        except ValueError:
            return error(400, "Invalid query parameters.", "E00400", "skippages and pagesize are integers.")
        if size > 1000 or size < 1:
            return error(400, "Page size is limited to 1000.", "E00400", "maxPageSizeAllowed is 1000.")
        if st.get("fail_page") == skip:
            return error(500, "An unexpected error occurred.", "E00500", "Try again later.")
        if st.get("malformed_page") == skip:
            return 200, {"Content-Type": "application/json"}, '{"collection": [{"draftInvoiceNumber": 1,'
        st.setdefault("pages_served", []).append(skip)
        drafts = st["drafts"]
        base = self.base(req)
        page = drafts[skip * size:(skip + 1) * size]
        last = max(0, (len(drafts) - 1) // size)
        pagination = {
            "maxPageSizeAllowed": 1000, "skipPages": skip, "pageSize": size,
            "results": len(drafts), "resultsWithoutFilter": len(drafts),
            "firstPage": f"{base}/invoices/drafts?skippages=0&pagesize={size}",
            "lastPage": f"{base}/invoices/drafts?skippages={last}&pagesize={size}",
        }
        if skip > 0:
            pagination["previousPage"] = f"{base}/invoices/drafts?skippages={skip - 1}&pagesize={size}"
        if skip < last:
            pagination["nextPage"] = f"{base}/invoices/drafts?skippages={skip + 1}&pagesize={size}"
        return 200, {}, {"collection": page, "pagination": pagination,
                         "self": f"{base}/invoices/drafts?skippages={skip}&pagesize={size}"}


def start(app_secret, grant, drafts=None) -> FakeServer:
    srv = FakeServer(EconomicHandler, state={"app_secret": app_secret, "grant": grant, "drafts": list(drafts or [])})
    return srv.start()
