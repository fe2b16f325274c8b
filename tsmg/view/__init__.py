"""``tsmg view``: a static, self-contained HTML report of evaluation and training runs.

:func:`build_report` reads run folders tolerantly (:mod:`tsmg.view.records`,
:mod:`tsmg.view.runs`), writes the episodes as chunked data files a page loads on demand
(:mod:`tsmg.view.data`), and the page itself (:mod:`tsmg.view.page`, ``static/view.js``).
"""

from tsmg.view.build import ReportFolderError, ViewReport, build_report
from tsmg.view.runs import NotARunError

__all__ = ["NotARunError", "ReportFolderError", "ViewReport", "build_report"]
