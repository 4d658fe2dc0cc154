"""How the observer moves (discrete executor, reference observer, active baseline, Nav2 adapter).

Empty until the observation-protocols issue; the layout is fixed by DESIGN.md section 1.
"""
