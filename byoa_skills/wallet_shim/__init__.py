"""The wallet shim, the gate: grants, limits, the visitor's choices and the models block each
call is checked against, the purpose judge's switch, and the activity log, in front of the
engine. The grant decision is in :mod:`byoa_skills.consent`, the judge in
:mod:`byoa_skills.judge`."""
